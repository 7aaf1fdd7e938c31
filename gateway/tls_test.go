package gateway

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/obs"
)

// startTLSGateway runs a gateway on a TLS port (self-signed certificate
// in a temp data dir) in front of h.
func startTLSGateway(t *testing.T, h http.HandlerFunc) (*Gateway, string) {
	t.Helper()
	g, err := New(Config{
		Listen:   Listen{Addr: "127.0.0.1:0", DisableHTTP3: true},
		DataDir:  t.TempDir(),
		Routes:   []Route{{Name: "r", Clusters: []RouteCluster{{Name: "c"}}}},
		Clusters: []Cluster{{Name: "c", Backends: []Backend{{Address: upstream(t, h)}}}},
	}, Options{Logger: obs.Discard, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	return g, g.Addrs().TLS
}

func tlsClient(h2 bool) *http.Client {
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: h2}
	if !h2 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}
}

// Over TLS, HTTP/1.1 connections go through the framing check and HTTP/2
// ones are served by net/http's own HTTP/2 server (the request reaches the
// gateway as HTTP/2.0: its Via says "2"); both carry the TLS state to the
// request (X-Forwarded-Proto and Forwarded say https), and a smuggling
// attempt over TLS gets 400.
func TestTLSListenerH1AndH2(t *testing.T) {
	seen := &pathLog{}
	_, addr := startTLSGateway(t, seen.handler)
	for _, tc := range []struct {
		h2         bool
		proto, via string // the gateway's Via names the protocol its request came in with
	}{{false, "HTTP/1.1", `via="1.1 veer"`}, {true, "HTTP/2.0", `via="2 veer"`}} {
		resp, body := get(t, tlsClient(tc.h2), "https://"+addr+"/x")
		if resp.Proto != tc.proto || resp.StatusCode != 200 || !strings.Contains(body, tc.via+" proto=https fwd=for=127.0.0.1;") || !strings.HasSuffix(body, ";proto=https") {
			t.Errorf("%s: %s %d %q", tc.proto, resp.Proto, resp.StatusCode, body)
		}
	}
	c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got := readResponses(t, c, "POST /s HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\na")
	if len(got) != 1 || !strings.HasPrefix(got[0], "400 ") {
		t.Fatalf("smuggling over TLS: %q, want one 400", got)
	}
	if p := seen.get(); len(p) != 2 {
		t.Fatalf("backend saw %q, want the two GETs only", p)
	}
}

// Shutdown lets requests in flight on HTTP/1.1 and HTTP/2 over TLS finish.
func TestTLSShutdownFinishesInFlight(t *testing.T) {
	arrived := make(chan struct{}, 2)
	release := make(chan struct{})
	g, addr := startTLSGateway(t, func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		_, _ = io.WriteString(w, "done")
	})
	var wg sync.WaitGroup
	results := make([]string, 2)
	for i, h2 := range []bool{false, true} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := tlsClient(h2).Get("https://" + addr + "/slow")
			if err != nil {
				results[i] = err.Error()
				return
			}
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			results[i] = resp.Proto + " " + string(b)
		}()
	}
	<-arrived
	<-arrived
	shuttingDown := make(chan struct{})
	g.srv.https.RegisterOnShutdown(func() { close(shuttingDown) }) // called once the listeners are closed
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		shut <- g.Shutdown(ctx)
	}()
	<-shuttingDown
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		_ = c.Close()
		t.Error("the TLS listener still accepts during Shutdown")
	}
	close(release)
	wg.Wait()
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if results[0] != "HTTP/1.1 done" || results[1] != "HTTP/2.0 done" {
		t.Fatalf("in-flight requests: %q", results)
	}
}
