package test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The gateway against software we did not write (issue 15): nginx as its
// upstream, HAProxy and nginx in front of it, h2load, hey and curl as its
// clients. Each tool is Debian's (scripts/test-deps.sh); a missing one
// fails the test. Bodies are compared by SHA-256, byte for byte.

// countingClient is an HTTP client whose dials are counted, to tell a kept
// connection from a new one.
type countingClient struct {
	*http.Client
	dials atomic.Int64
}

func newCountingClient(h2 bool) *countingClient {
	c := &countingClient{}
	d := &net.Dialer{Timeout: 5 * time.Second}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c.dials.Add(1)
			return d.DialContext(ctx, network, addr)
		},
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the gateway's self-signed test certificate
		DisableCompression:  true,
		MaxIdleConnsPerHost: 64,
	}
	if h2 {
		tr.ForceAttemptHTTP2 = true
	}
	c.Client = &http.Client{Transport: tr, Timeout: 20 * time.Second}
	return c
}

// nginxBigSize is the size of files/big in nginxFiles' root.
const nginxBigSize = 4 << 20

// nginxFiles makes a document root for nginx with files/big (random,
// nginxBigSize bytes) and files/small (3000 bytes), and returns the root,
// big's bytes and both files' SHA-256.
func nginxFiles(t *testing.T) (www string, big []byte, bigSum, smallSum string) {
	t.Helper()
	www = t.TempDir()
	if err := os.MkdirAll(filepath.Join(www, "files"), 0o755); err != nil {
		t.Fatal(err)
	}
	bigSum = randomFile(t, filepath.Join(www, "files"), "big", nginxBigSize)
	smallSum = randomFile(t, filepath.Join(www, "files"), "small", 3000)
	big, err := os.ReadFile(filepath.Join(www, "files", "big"))
	if err != nil {
		t.Fatal(err)
	}
	return www, big, bigSum, smallSum
}

// getConcurrently GETs url per times from each of conc goroutines and
// fails the test unless every answer is a 200 whose body hashes to sum.
func getConcurrently(t *testing.T, c *countingClient, url, sum string, conc, per int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, conc)
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				resp, err := c.Get(url)
				if err != nil {
					errs <- err
					return
				}
				b, err := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || sha(b) != sum {
					errs <- fmt.Errorf("status %d, err %v, sha256 match %v", resp.StatusCode, err, sha(b) == sum)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func (c *countingClient) do(t *testing.T, method, url string, body io.Reader, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, url, err)
	}
	return resp, b
}

// nginxStatus reads nginx's stub_status: connections open (without the one
// asking), connections accepted and requests served so far.
func nginxStatus(t *testing.T, addr string) (active, accepts, requests int) {
	t.Helper()
	c := newCountingClient(false)
	defer c.CloseIdleConnections()
	resp, b := c.do(t, "GET", "http://"+addr+"/status", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("stub_status: %d %s", resp.StatusCode, b)
	}
	// Active connections: 3 \nserver accepts handled requests\n 10 10 42 \n...
	f := strings.Fields(string(b))
	if len(f) < 10 {
		t.Fatalf("stub_status: %q", b)
	}
	active, _ = strconv.Atoi(f[2])
	accepts, _ = strconv.Atoi(f[7])
	requests, _ = strconv.Atoi(f[9])
	return active - 1, accepts, requests
}

const nginxUpstream = `
server {
  listen %LISTEN0%%H2%;
  keepalive_timeout 60s 60s;  # also sends "Keep-Alive: timeout=60", a hop-by-hop header
  keepalive_requests 100000;
  etag on;
  root %WWW%;
  location /files/ { }
  location /gz/ {
    alias %WWW%/files/;
    gzip on; gzip_types *; gzip_min_length 0; gzip_proxied any;
  }
  location /close/ { alias %WWW%/files/; keepalive_timeout 0; }
  location = /empty { return 204; }
  location = /proto { return 200 "$server_protocol"; }
  location = /headers {
    return 200 "xfoo=$http_x_foo|conn=$http_connection|ka=$http_keep_alive|pc=$http_proxy_connection|te=$http_te|xff=$http_x_forwarded_for|xfh=$http_x_forwarded_host|xfp=$http_x_forwarded_proto|fwd=$http_forwarded|via=$http_via|host=$host";
  }
  location /dav/ {
    root %WWW%;
    dav_methods PUT DELETE;
    create_full_put_path on;
    client_max_body_size 64m;
    client_body_buffer_size 1m;
  }
}
server {
  listen %LISTEN1%;
  location = /status { stub_status; }
}
`

// TestGatewayInteropNginxUpstream puts nginx behind the gateway: static
// files of 4 MiB (Content-Length), gzip (chunked), an upstream that closes
// every connection, HEAD, 204, 304 and WebDAV uploads, over HTTP/1.1 and
// HTTP/2 (TLS) to the gateway; hop-by-hop headers do not cross it in either
// direction, X-Forwarded-* and Forwarded are appended, and the gateway keeps
// a bounded number of connections to nginx.
func TestGatewayInteropNginxUpstream(t *testing.T) {
	www, big, bigSum, smallSum := nginxFiles(t)
	addrs := []string{"", ""}
	startNginx(t, strings.NewReplacer("%WWW%", www, "%H2%", "").Replace(nginxUpstream), addrs...)
	up, status := addrs[0], addrs[1]
	const maxIdle = 8
	g := interopGateway(t, `
routes: [{name: r, clusters: [{name: nginx}]}]
clusters: [{name: nginx, max_idle_per_backend: `+strconv.Itoa(maxIdle)+`, backends: [{address: '`+up+`'}]}]
trusted_networks: [127.0.0.0/8]   # the client's X-Forwarded-For and Forwarded are kept
`)
	bases := map[string]string{"h1": "http://" + g.Addrs().Plain, "h2": "https://" + g.Addrs().TLS}
	direct := newCountingClient(false)
	defer direct.CloseIdleConnections()

	for _, proto := range []string{"h1", "h2"} {
		base := bases[proto]
		c := newCountingClient(proto == "h2")
		t.Run(proto, func(t *testing.T) {
			defer c.CloseIdleConnections()
			wantProto := map[string]int{"h1": 1, "h2": 2}[proto]

			resp, b := c.do(t, "GET", base+"/files/big", nil)
			if resp.StatusCode != 200 || sha(b) != bigSum || resp.ContentLength != nginxBigSize {
				t.Fatalf("GET /files/big: %d, %d bytes (Content-Length %d), sha256 match %v", resp.StatusCode, len(b), resp.ContentLength, sha(b) == bigSum)
			}
			if resp.ProtoMajor != wantProto {
				t.Fatalf("client spoke %s, want HTTP/%d", resp.Proto, wantProto)
			}

			// nginx compresses with unknown length: chunked upstream.
			dresp, _ := direct.do(t, "GET", "http://"+up+"/gz/big", nil, "Accept-Encoding", "gzip")
			if len(dresp.TransferEncoding) == 0 || dresp.Header.Get("Content-Encoding") != "gzip" {
				t.Fatalf("nginx did not answer chunked gzip directly (TE %v, CE %q): the test proves nothing", dresp.TransferEncoding, dresp.Header.Get("Content-Encoding"))
			}
			resp, b = c.do(t, "GET", base+"/gz/big", nil, "Accept-Encoding", "gzip")
			if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "gzip" {
				t.Fatalf("GET /gz/big: %d, Content-Encoding %q", resp.StatusCode, resp.Header.Get("Content-Encoding"))
			}
			zr, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			plain, err := io.ReadAll(zr)
			if err != nil || sha(plain) != bigSum {
				t.Fatalf("GET /gz/big: gunzipped %d bytes, err %v, sha256 match %v", len(plain), err, sha(plain) == bigSum)
			}

			// An upstream that closes every connection: the client's
			// connection to the gateway stays open.
			dresp, _ = direct.do(t, "GET", "http://"+up+"/close/small", nil)
			if !dresp.Close {
				t.Fatal("nginx did not send Connection: close on /close/: the test proves nothing")
			}
			before := c.dials.Load()
			for i := range 30 {
				resp, b = c.do(t, "GET", base+"/close/small", nil)
				if resp.StatusCode != 200 || sha(b) != smallSum || resp.Close {
					t.Fatalf("GET /close/small #%d: %d, sha256 match %v, Close %v", i, resp.StatusCode, sha(b) == smallSum, resp.Close)
				}
			}
			if d := c.dials.Load() - before; d > 0 {
				t.Errorf("30 requests to an upstream that closes: the client dialled the gateway %d more times, want 0 (the upstream's Connection: close leaked to the client side)", d)
			}

			// HEAD: the length, no body, and the connection still usable.
			before = c.dials.Load()
			resp, b = c.do(t, "HEAD", base+"/files/big", nil)
			if resp.StatusCode != 200 || len(b) != 0 || resp.ContentLength != nginxBigSize {
				t.Fatalf("HEAD /files/big: %d, body %d bytes, Content-Length %d", resp.StatusCode, len(b), resp.ContentLength)
			}
			resp, b = c.do(t, "GET", base+"/files/small", nil)
			if resp.StatusCode != 200 || sha(b) != smallSum {
				t.Fatalf("GET after HEAD: %d, sha256 match %v", resp.StatusCode, sha(b) == smallSum)
			}
			etag := resp.Header.Get("ETag")
			if etag == "" {
				t.Fatal("nginx sent no ETag")
			}
			resp, b = c.do(t, "GET", base+"/empty", nil)
			if resp.StatusCode != 204 || len(b) != 0 {
				t.Fatalf("GET /empty: %d, body %q", resp.StatusCode, b)
			}
			resp, b = c.do(t, "GET", base+"/files/small", nil, "If-None-Match", etag)
			if resp.StatusCode != 304 || len(b) != 0 || resp.Header.Get("ETag") != etag {
				t.Fatalf("conditional GET: %d, body %d bytes, ETag %q want %q", resp.StatusCode, len(b), resp.Header.Get("ETag"), etag)
			}
			resp, b = c.do(t, "GET", base+"/files/small", nil)
			if resp.StatusCode != 200 || sha(b) != smallSum {
				t.Fatalf("GET after 204 and 304: %d, sha256 match %v", resp.StatusCode, sha(b) == smallSum)
			}
			if d := c.dials.Load() - before; d > 0 {
				t.Errorf("HEAD, 204 and 304 cost %d new connections to the gateway, want 0", d)
			}

			// Uploads: PUT 4 MiB to nginx's WebDAV, read it back.
			name := "/dav/" + proto + "/up.bin"
			resp, b = c.do(t, "PUT", base+name, bytes.NewReader(big))
			if resp.StatusCode != 201 && resp.StatusCode != 204 {
				t.Fatalf("PUT %s: %d %s", name, resp.StatusCode, b)
			}
			resp, b = c.do(t, "GET", base+name, nil)
			if resp.StatusCode != 200 || sha(b) != bigSum {
				t.Fatalf("GET %s after PUT: %d, %d bytes, sha256 match %v", name, resp.StatusCode, len(b), sha(b) == bigSum)
			}

			// Hop-by-hop headers, both ways; forwarding headers appended.
			hdr := []string{"X-Forwarded-For", "192.0.2.7", "Forwarded", "for=192.0.2.7"}
			if proto == "h1" { // HTTP/2 has no connection-specific headers (RFC 9113 §8.2.2)
				hdr = append(hdr, "Connection", "X-Foo", "X-Foo", "secret", "Keep-Alive", "timeout=5", "Proxy-Connection", "keep-alive")
			}
			resp, b = c.do(t, "GET", base+"/headers", nil, hdr...)
			got := map[string]string{}
			for _, kv := range strings.Split(string(b), "|") {
				k, v, _ := strings.Cut(kv, "=")
				got[k] = v
			}
			scheme := map[string]string{"h1": "http", "h2": "https"}[proto]
			host := strings.TrimPrefix(base, scheme+"://")
			want := map[string]string{
				"xfoo": "", "conn": "", "ka": "", "pc": "", "te": "",
				"xff": "192.0.2.7, 127.0.0.1",
				"xfh": host, "xfp": scheme,
				"fwd":  `for=192.0.2.7, for=127.0.0.1;host="` + host + `";proto=` + scheme,
				"host": strings.Split(host, ":")[0],
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("upstream saw %s=%q, want %q (all: %s)", k, got[k], v, b)
				}
			}
			if !strings.HasPrefix(got["via"], wantVia(wantProto)) {
				t.Errorf("upstream saw Via %q, want it to start with %q (RFC 9110 §7.6.3: a gateway MUST send Via in each inbound request)", got["via"], wantVia(wantProto))
			}
			dresp, _ = direct.do(t, "GET", "http://"+up+"/headers", nil)
			if dresp.Header.Get("Keep-Alive") == "" {
				t.Fatal("nginx sent no Keep-Alive header directly: the test proves nothing")
			}
			if v := resp.Header.Get("Keep-Alive"); v != "" {
				t.Errorf("client got the upstream's hop-by-hop Keep-Alive: %q", v)
			}
		})
	}

	// Connections to nginx stay bounded under concurrent load and are
	// reused: at c = the idle pool, no more connections accepted than
	// clients (a leak, a connection neither reused nor closed, would cost
	// one per request).
	direct.CloseIdleConnections()
	_, accepts0, requests0 := nginxStatus(t, status)
	const conc, per = maxIdle, 50
	c := newCountingClient(false)
	defer c.CloseIdleConnections()
	getConcurrently(t, c, bases["h1"]+"/files/small", smallSum, conc, per)
	active := established(t, up)
	_, accepts1, requests1 := nginxStatus(t, status)
	t.Logf("after %d requests at c=%d: nginx has %d connections open, accepted %d, served %d", conc*per, conc, active, accepts1-accepts0, requests1-requests0)
	if n := requests1 - requests0 - 1; n != conc*per { // -1: the first stub_status request
		t.Errorf("nginx served %d requests, want %d (one upstream attempt per request)", n, conc*per)
	}
	// Connections beyond the idle pool are closed when they come back to
	// it, which can happen just after the client has its answer: allow
	// those (at most one per client) on top of the pool.
	if active > maxIdle+conc {
		t.Errorf("%d connections open to nginx after load at c=%d, want at most max_idle_per_backend %d + %d", active, conc, maxIdle, conc)
	}
	if n := accepts1 - accepts0 - 1; n > conc { // -1: the second stub_status connection
		t.Errorf("nginx accepted %d connections for %d requests at c=%d: keep-alive to the upstream is not reused", n, conc*per, conc)
	}
}

// wantVia is the received-protocol a Via entry starts with for a request
// that arrived over HTTP/major.
func wantVia(major int) string {
	if major == 1 {
		return "1.1 "
	}
	return strconv.Itoa(major) + " "
}
