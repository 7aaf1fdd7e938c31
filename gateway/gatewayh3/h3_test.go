package gatewayh3_test

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/quic-go/quic-go/http3"

	"github.com/veerhq/veer/gateway"
	"github.com/veerhq/veer/gateway/gatewayh3"
	"github.com/veerhq/veer/obs"
)

// TestTLSAndHTTP3OnOnePort starts the gateway without a certificate (it
// generates a self-signed one in its data dir) and reaches one backend over
// HTTP/1.1 and HTTP/2 on TLS and over HTTP/3 on the same port number.
func TestTLSAndHTTP3OnOnePort(t *testing.T) {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "hello") }))
	defer be.Close()
	dir := t.TempDir()
	g, err := gateway.New(gateway.Config{
		Listen:   gateway.Listen{Addr: "127.0.0.1:0"},
		DataDir:  dir,
		Routes:   []gateway.Route{{Name: "r", Clusters: []gateway.RouteCluster{{Name: "c"}}}},
		Clusters: []gateway.Cluster{{Name: "c", Backends: []gateway.Backend{{Address: be.Listener.Addr().String()}}}},
	}, gateway.Options{Logger: obs.Discard, Registerer: prometheus.NewRegistry(), HTTP3: gatewayh3.Listen})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = g.Shutdown(ctx)
	}()
	addr := g.Addrs().TLS
	tlsConf := &tls.Config{InsecureSkipVerify: true} // the generated self-signed certificate
	for _, tc := range []struct {
		name  string
		rt    http.RoundTripper
		proto string
	}{
		{"h1", &http.Transport{TLSClientConfig: tlsConf, ForceAttemptHTTP2: false, TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}, "HTTP/1.1"},
		{"h2", &http.Transport{TLSClientConfig: tlsConf, ForceAttemptHTTP2: true}, "HTTP/2.0"},
		{"h3", &http3.Transport{TLSClientConfig: tlsConf}, "HTTP/3.0"},
	} {
		resp, err := (&http.Client{Transport: tc.rt, Timeout: 5 * time.Second}).Get("https://" + addr + "/")
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.Proto != tc.proto || string(b) != "hello" {
			t.Errorf("%s: %s %q, want %s hello", tc.name, resp.Proto, b, tc.proto)
		}
		if tc.name != "h3" && !strings.HasPrefix(resp.Header.Get("Alt-Svc"), `h3=":`) {
			t.Errorf("%s: Alt-Svc %q", tc.name, resp.Header.Get("Alt-Svc"))
		}
		if c, ok := tc.rt.(interface{ CloseIdleConnections() }); ok {
			c.CloseIdleConnections()
		}
		if c, ok := tc.rt.(io.Closer); ok {
			c.Close() // http3.Transport: its UDP socket and reader (goleak)
		}
	}
}
