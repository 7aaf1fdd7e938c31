package test

import (
	"bytes"
	"compress/gzip"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/veerhq/veer/internal/selfsigned"
)

// TestGatewayInteropNginxH2Upstream: nginx as an HTTP/2 upstream, over TLS
// (ALPN h2) and h2c (prior knowledge): nginx says it spoke HTTP/2, large,
// gzip (no length), empty and 304 answers and a 4 MiB WebDAV upload are
// intact, and concurrent requests share one multiplexed connection.
func TestGatewayInteropNginxH2Upstream(t *testing.T) {
	www, big, bigSum, smallSum := nginxFiles(t)
	cert, key, _, err := selfsigned.Files(t.TempDir(), "nginx", "localhost", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ proto, listen, cluster string }{
		{"h2", " ssl http2;\n  ssl_certificate " + cert + ";\n  ssl_certificate_key " + key, "protocol: h2, insecure_skip_verify: true"},
		{"h2c", " http2", "protocol: h2c"},
	} {
		t.Run(tc.proto, func(t *testing.T) {
			addrs := []string{"", ""}
			startNginx(t, strings.NewReplacer("%WWW%", www, "%H2%", tc.listen).Replace(nginxUpstream), addrs...)
			up, status := addrs[0], addrs[1]
			g := interopGateway(t, `
routes: [{name: r, clusters: [{name: nginx}]}]
clusters: [{name: nginx, `+tc.cluster+`, backends: [{address: '`+up+`'}]}]
`)
			base := "http://" + g.Addrs().Plain
			c := newCountingClient(false)
			defer c.CloseIdleConnections()
			if resp, b := c.do(t, "GET", base+"/proto", nil); string(b) != "HTTP/2.0" {
				t.Fatalf("nginx saw %q (%d), want HTTP/2.0", b, resp.StatusCode)
			}
			resp, b := c.do(t, "GET", base+"/files/big", nil)
			if resp.StatusCode != 200 || sha(b) != bigSum || resp.ContentLength != nginxBigSize {
				t.Fatalf("GET /files/big: %d, %d bytes (Content-Length %d), sha256 match %v", resp.StatusCode, len(b), resp.ContentLength, sha(b) == bigSum)
			}
			resp, b = c.do(t, "GET", base+"/gz/big", nil, "Accept-Encoding", "gzip")
			zr, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				t.Fatalf("GET /gz/big: %d: %v", resp.StatusCode, err)
			}
			if plain, err := io.ReadAll(zr); err != nil || sha(plain) != bigSum {
				t.Fatalf("GET /gz/big: gunzipped %d bytes, err %v, sha256 match %v", len(plain), err, sha(plain) == bigSum)
			}
			resp, b = c.do(t, "HEAD", base+"/files/big", nil)
			if resp.StatusCode != 200 || len(b) != 0 || resp.ContentLength != nginxBigSize {
				t.Fatalf("HEAD /files/big: %d, body %d bytes, Content-Length %d", resp.StatusCode, len(b), resp.ContentLength)
			}
			if resp, b = c.do(t, "GET", base+"/empty", nil); resp.StatusCode != 204 || len(b) != 0 {
				t.Fatalf("GET /empty: %d, body %q", resp.StatusCode, b)
			}
			resp, _ = c.do(t, "GET", base+"/files/small", nil)
			etag := resp.Header.Get("ETag")
			if resp, b = c.do(t, "GET", base+"/files/small", nil, "If-None-Match", etag); resp.StatusCode != 304 || len(b) != 0 {
				t.Fatalf("conditional GET: %d, body %d bytes", resp.StatusCode, len(b))
			}
			if resp, b = c.do(t, "PUT", base+"/dav/up.bin", bytes.NewReader(big)); resp.StatusCode != 201 && resp.StatusCode != 204 {
				t.Fatalf("PUT: %d %s", resp.StatusCode, b)
			}
			if resp, b = c.do(t, "GET", base+"/dav/up.bin", nil); resp.StatusCode != 200 || sha(b) != bigSum {
				t.Fatalf("GET after PUT: %d, %d bytes, sha256 match %v", resp.StatusCode, len(b), sha(b) == bigSum)
			}

			_, accepts0, _ := nginxStatus(t, status)
			getConcurrently(t, c, base+"/files/small", smallSum, 8, 25)
			open := established(t, up)
			_, accepts1, _ := nginxStatus(t, status)
			t.Logf("after 200 requests at c=8 over %s: %d connections open to nginx, %d accepted", tc.proto, open, accepts1-accepts0-1)
			if open != 1 || accepts1-accepts0-1 != 0 {
				t.Errorf("%d connections open to nginx and %d new ones during the load, want the one multiplexed connection", open, accepts1-accepts0-1)
			}
		})
	}
}
