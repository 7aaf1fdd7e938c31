package gateway

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// A POST whose upstream connection was reset before any byte of it was
// written never reached the upstream: it is retried on the route's other
// cluster, with its body, through the gateway's own HTTP/1.1 client and
// through http.Transport (a cluster with a connection cap uses it). Before
// attempts reported outcome.Unwritten, both answered 502.
func TestUnwrittenPOSTRetried(t *testing.T) {
	b, bHits := echoUpstream(t, "b")
	rst, dial := resetBeforeRead(t)
	cfg := parseConfig(t, fill(`
routes:
  - {name: own, path_prefix: /own, clusters: [{name: rst}, {name: b}]}
  - {name: std, path_prefix: /std, clusters: [{name: rststd}, {name: b}]}
clusters:
  - {name: rst, backends: [{address: RST}], outlier: {consecutive_errors: 1000}}
  - {name: rststd, max_conns_per_backend: 8, backends: [{address: RST}], outlier: {consecutive_errors: 1000}}
  - {name: b, backends: [{address: B}]}
retry: {policy: {initial: 1ms}, budget: {min_retries: 100}}
`, "RST", rst, "B", b))
	g := startGatewayOpts(t, cfg, Options{DialContext: dial})
	if _, ok := g.snap.Load().clusters["rststd"].transport.(*http.Transport); !ok {
		t.Fatal("cluster rststd does not use http.Transport")
	}
	for _, path := range []string{"/own", "/std"} {
		before := bHits.Load()
		resp, err := http.Post("http://"+g.Addrs().Plain+path, "text/plain", strings.NewReader("payload"))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "b POST payload" || bHits.Load() != before+1 {
			t.Errorf("%s: %d %q (b hit %d times), want 200 from b once", path, resp.StatusCode, body, bHits.Load()-before)
		}
	}
}

// resetBeforeRead starts a real backend that accepts each connection and
// resets it (SO_LINGER 0) without reading. Its dial function connects and
// returns the connection once the backend has reset it, so that the
// request is written to a connection already gone: a reset sent at once
// and a request written right after connect otherwise race (the reset may
// even fail the connect).
func resetBeforeRead(t *testing.T) (string, func(ctx context.Context, network, addr string) (net.Conn, error)) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	resetNow := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			select {
			case <-resetNow:
			case <-done:
			}
			_ = c.(*net.TCPConn).SetLinger(0)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if addr == ln.Addr().String() {
			resetNow <- struct{}{}
			var b [1]byte
			if n, _ := c.Read(b[:]); n > 0 { // returns with the reset
				c.Close()
				return nil, errors.New("backend sent data")
			}
		}
		return c, nil
	}
	return ln.Addr().String(), dial
}
