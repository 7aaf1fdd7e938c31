package gateway

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/obs"
)

// startGateway parses yaml (with %PLACEHOLDERS% already replaced), starts
// the gateway on a random plain port and returns it with its base URL.
func startGateway(t *testing.T, yaml string) (*Gateway, string) {
	t.Helper()
	return startGatewayCfg(t, parseConfig(t, yaml))
}

// parseConfig parses a test config.
func parseConfig(t *testing.T, yaml string) Config {
	t.Helper()
	var cfg Config
	if err := config.Parse([]byte(yaml), "test.yaml", &cfg); err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}

// startGatewayOpts starts cfg on a random plain port only (no TLS
// listener) with opts (a discarding logger and a fresh registry unless
// set) and drains it when the test ends.
func startGatewayOpts(t *testing.T, cfg Config, opts Options) *Gateway {
	t.Helper()
	cfg.Listen.Addr = "off"
	cfg.Listen.Plain = "127.0.0.1:0"
	if opts.Logger == nil {
		opts.Logger = obs.Discard
	}
	if opts.Registerer == nil {
		opts.Registerer = prometheus.NewRegistry()
	}
	g, err := New(cfg, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := g.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = g.Shutdown(ctx)
	})
	return g
}

// upstream starts an httptest server and returns its host:port.
func upstream(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s.Listener.Addr().String()
}

// echoUpstream starts a backend that answers "<name> <method> <body>" and
// counts its requests.
func echoUpstream(t *testing.T, name string) (addr string, hits *atomic.Int64) {
	t.Helper()
	hits = new(atomic.Int64)
	addr = upstream(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s", name, r.Method, body)
	})
	return addr, hits
}

// deadAddr returns a loopback address where nothing listens (connect is
// refused).
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := ln.Addr().String()
	_ = ln.Close()
	return a
}

func get(t *testing.T, c *http.Client, url string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	return resp, string(b)
}

func fill(s string, kv ...string) string {
	return strings.NewReplacer(kv...).Replace(s)
}

// rawRequest writes raw bytes to addr and returns what comes back until the
// server closes or 2 s pass.
func rawRequest(t *testing.T, addr, raw string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(c)
	return string(b)
}

func obsDiscard() *slog.Logger { return obs.Discard }

// pipeServer serves h over in-memory pipes, for tests inside a synctest
// bubble (real sockets are not durably blocking there).
type pipeServer struct {
	conns chan net.Conn
	done  chan struct{}
}

func newPipeServer(t *testing.T, h http.Handler) *pipeServer {
	p := &pipeServer{conns: make(chan net.Conn), done: make(chan struct{})}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(p) }()
	t.Cleanup(func() { _ = srv.Close() })
	return p
}

func (p *pipeServer) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	a, b := net.Pipe()
	select {
	case p.conns <- b:
		return a, nil
	case <-p.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (p *pipeServer) Accept() (net.Conn, error) {
	select {
	case c := <-p.conns:
		return c, nil
	case <-p.done:
		return nil, net.ErrClosed
	}
}

func (p *pipeServer) Close() error {
	select {
	case <-p.done:
	default:
		close(p.done)
	}
	return nil
}

func (p *pipeServer) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 80} }

var testMetrics = newMetrics(prometheus.NewRegistry())

func startGatewayCfg(t *testing.T, cfg Config) (*Gateway, string) {
	t.Helper()
	g := startGatewayOpts(t, cfg, Options{Gatherer: prometheus.NewRegistry()})
	return g, "http://" + g.Addrs().Plain
}
