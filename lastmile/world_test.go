package lastmile

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/veerhq/veer/lastmile/lmtest"
)

var nodeNames = []string{"api.test", "api2.test", "cdn1.test", "cdn2.test", "lb.test", "sched.test"}

// world is a loopback internet: DNS servers, access nodes, a scheduler.
type world struct {
	*dnsEnv
	reg *prometheus.Registry
}

func newWorld(t *testing.T) *world {
	t.Helper()
	recs := map[string][]netip.Addr{}
	for _, n := range nodeNames {
		recs[n] = addrs("127.0.0.1")
	}
	return &world{dnsEnv: newDNSEnv(t, recs), reg: prometheus.NewRegistry()}
}

func (w *world) node(t *testing.T, name string, o lmtest.NodeOptions) *lmtest.Node {
	t.Helper()
	o.Names = nodeNames
	n, err := lmtest.NewNode(name, w.ca, o)
	must(t, err)
	t.Cleanup(func() { n.Close() })
	return n
}

// deadAddr is a loopback address nothing listens on (TCP refused, UDP
// unanswered).
func deadAddr(t *testing.T) string {
	t.Helper()
	pc, ln, err := lmtest.ListenPair()
	must(t, err)
	addr := ln.Addr().String()
	ln.Close()
	pc.Close()
	return addr
}

func port(addr string) int {
	_, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return n
}

func (w *world) transport(t *testing.T, cfg Config, mod ...func(*Options)) *Transport {
	t.Helper()
	if cfg.DNS.Timeout == 0 {
		d := w.dnsConfig()
		d.Order, d.CacheFile, d.Bootstrap, d.Expected = cfg.DNS.Order, cfg.DNS.CacheFile, cfg.DNS.Bootstrap, cfg.DNS.Expected
		cfg.DNS = d
	}
	if cfg.Race.ConnectTimeout == 0 {
		cfg.Race.ConnectTimeout = 2 * time.Second
	}
	// The test nodes serve HTTP/3 without advertising it (Alt-Svc): most
	// tests exercise the race from the first contact. h3_test.go covers
	// the default.
	cfg.Race.AssumeH3 = !cfg.Race.DisableH3
	if cfg.Race.TCPDelay == 0 {
		// Tests that expect HTTP/3 to win must not depend on the machine's
		// load: TCP starts only when QUIC failed.
		cfg.Race.TCPDelay = 5 * time.Second
	}
	opts := w.options(t)
	opts.Registerer = w.reg
	for _, m := range mod {
		m(&opts)
	}
	tp, err := New(cfg, opts)
	must(t, err)
	t.Cleanup(func() { tp.Close() })
	return tp
}

// get sends GET url through tp and returns the body and the trace.
func get(t *testing.T, tp http.RoundTripper, url string) (string, *Trace, error) {
	t.Helper()
	tr := &Trace{}
	ctx, cancel := context.WithTimeout(WithTrace(context.Background(), tr), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	must(t, err)
	resp, err := tp.RoundTrip(req)
	if err != nil {
		return "", tr, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), tr, err
}

func mustGet(t *testing.T, tp http.RoundTripper, url string) (string, *Trace) {
	t.Helper()
	body, tr, err := get(t, tp, url)
	if err != nil {
		t.Fatalf("GET %s: %v; trace %s", url, err, tr)
	}
	return body, tr
}
