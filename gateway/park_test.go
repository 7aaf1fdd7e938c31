package gateway

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// parkSignal makes the gateway's listener i report each parked
// connection on the returned channel.
func parkSignal(g *Gateway, i int) <-chan struct{} {
	ch := make(chan struct{}, 16)
	g.srv.lns[i].SetOnPark(func() { ch <- struct{}{} })
	return ch
}

func waitParked(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("the idle connection was not parked")
	}
}

// oneResponse writes raw on c and reads one response.
func oneResponse(t *testing.T, br *bufio.Reader, c net.Conn, raw string) string {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("response: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	return resp.Status + " " + string(b)
}

// An idle keep-alive connection is taken from net/http (parked) and
// served again when the client sends its next request, over plain TCP
// and over TLS; Shutdown closes a parked connection.
func TestIdleConnectionParks(t *testing.T) {
	seen := &pathLog{}
	up := upstream(t, seen.handler)
	g, err := New(Config{
		Listen:   Listen{Addr: "127.0.0.1:0", Plain: "127.0.0.1:0", DisableHTTP3: true},
		DataDir:  t.TempDir(),
		Routes:   []Route{{Name: "r", Clusters: []RouteCluster{{Name: "c"}}}},
		Clusters: []Cluster{{Name: "c", Backends: []Backend{{Address: up}}}},
	}, Options{Logger: obsDiscard()})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	tlsParked, plainParked := parkSignal(g, 0), parkSignal(g, 1)
	plain, err := net.Dial("tcp", g.Addrs().Plain)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	secure, err := tls.Dial("tcp", g.Addrs().TLS, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer secure.Close()
	for _, tc := range []struct {
		name   string
		c      net.Conn
		parked <-chan struct{}
	}{{"plain", plain, plainParked}, {"tls", secure, tlsParked}} {
		br := bufio.NewReader(tc.c)
		for i, path := range []string{"/one", "/two", "/three"} {
			got := oneResponse(t, br, tc.c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n")
			if !strings.HasPrefix(got, `200 OK GET `+path) {
				t.Fatalf("%s request %d: %q", tc.name, i, got)
			}
			waitParked(t, tc.parked)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := g.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []net.Conn{plain, secure} {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
			t.Fatalf("parked connection not closed by Shutdown: %d %v", n, err)
		}
	}
}

// A parked connection is still closed at the idle timeout.
func TestParkedConnectionIdleTimeout(t *testing.T) {
	up := upstream(t, (&pathLog{}).handler)
	g, base := startGateway(t, fill(`
listen: {idle_timeout: 600ms}
routes: [{name: r, clusters: [{name: c}]}]
clusters: [{name: c, backends: [{address: U}]}]
`, "U", up))
	parked := parkSignal(g, 0)
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if got := oneResponse(t, bufio.NewReader(c), c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); !strings.HasPrefix(got, "200") {
		t.Fatal(got)
	}
	waitParked(t, parked)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := c.Read(make([]byte, 1))
	if n != 0 || err != io.EOF {
		t.Fatalf("idle connection: %d %v, want EOF from the server", n, err)
	}
	if d := time.Since(start); d < 500*time.Millisecond {
		t.Fatalf("closed after %v, before the 600ms idle timeout", d)
	}
}
