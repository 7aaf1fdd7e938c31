package lastmile

import (
	"context"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/veerhq/veer/lastmile/lmtest"
	"github.com/veerhq/veer/outcome"
)

// An origin without QUIC (UDP port closed: the kernel answers QUIC with an
// ICMP port-unreachable) fails the QUIC attempt at once and TCP starts
// without waiting for tcp_delay (10 s here, longer than the request's 5 s
// deadline).
func TestQUICToClosedUDPPortFailsAtOnce(t *testing.T) {
	w := newWorld(t)
	n := w.node(t, "tcponly", lmtest.NodeOptions{NoQUIC: true})
	tp := w.transport(t, Config{Steps: []RouteStep{StepDirect}, Race: RaceConfig{TCPDelay: 10 * time.Second, ConnectTimeout: 20 * time.Second}})
	tr := &Trace{}
	ctx, cancel := context.WithTimeout(WithTrace(context.Background(), tr), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.test:"+strconv.Itoa(port(n.Addr()))+"/", nil)
	resp, err := tp.RoundTrip(req)
	if err != nil {
		t.Fatalf("%v; trace %s", err, tr)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "tcponly HTTP/2.0" {
		t.Fatalf("body %q", body)
	}
	if len(tr.Failures) != 1 || tr.Failures[0].Protocol != ProtocolH3 || tr.Failures[0].Kind != outcome.ConnectRefused || !errors.Is(tr.Failures[0].Err, ErrUDPRefused) {
		t.Fatalf("failures %v, want one h3 connect_refused (ErrUDPRefused)", tr.Failures)
	}
}

// An origin that never advertised HTTP/3 gets no QUIC attempt by default:
// its UDP side swallows packets here, and tcp_delay is 10 s, longer than
// the request's deadline; TCP goes first and serves.
func TestNoQUICWithoutAltSvc(t *testing.T) {
	w := newWorld(t)
	n := w.node(t, "n", lmtest.NodeOptions{})
	n.BlockQUIC(true)
	opts := w.options(t)
	tp, err := New(Config{
		Steps: []RouteStep{StepDirect},
		DNS:   w.dnsConfig(),
		Race:  RaceConfig{TCPDelay: 10 * time.Second, ConnectTimeout: 20 * time.Second},
	}, opts)
	must(t, err)
	t.Cleanup(func() { tp.Close() })
	url := "https://api.test:" + strconv.Itoa(port(n.Addr())) + "/"
	tr := &Trace{}
	ctx, cancel := context.WithTimeout(WithTrace(context.Background(), tr), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := tp.RoundTrip(req)
	if err != nil {
		t.Fatalf("%v; trace %s", err, tr)
	}
	resp.Body.Close()
	if tr.Protocol != "h2" || len(tr.Failures) != 0 {
		t.Fatalf("trace %s: want h2 without a QUIC attempt", tr)
	}
}

func TestParseAltSvc(t *testing.T) {
	for _, c := range []struct {
		in       string
		ma       time.Duration
		clear, h bool
	}{
		{`h3=":443"; ma=3600`, time.Hour, false, true},
		{`h2=":443", h3=":443"`, defaultAltSvcMaxAge, false, true},
		{`h3="other.example:443"`, 0, false, false}, // another host
		{`h3=":8443"`, 0, false, false},             // another port
		{`h3-29=":443"`, 0, false, false},
		{`h3=":443"; ma=0`, 0, false, false},
		{`h3=":443"; ma=99999999`, maxAltSvcMaxAge, false, true},
		{`clear`, 0, true, false},
		{`garbage;;,=`, 0, false, false},
	} {
		ma, clear, ok := parseAltSvcH3([]string{c.in}, "443")
		if ma != c.ma || clear != c.clear || ok != c.h {
			t.Errorf("%q: %v %v %v, want %v %v %v", c.in, ma, clear, ok, c.ma, c.clear, c.h)
		}
	}
}

// The broken-protocol memory is persisted per network with the DNS cache:
// a QUIC that failed on a node (its UDP port is closed) is not tried again
// by the next launch on the same network, and is tried on another network.
func TestBrokenQUICRememberedAcrossLaunches(t *testing.T) {
	w := newWorld(t)
	n := w.node(t, "n", lmtest.NodeOptions{NoQUIC: true})
	path := filepath.Join(t.TempDir(), "lastmile.json")
	url := "https://api.test:" + strconv.Itoa(port(n.Addr())) + "/"
	launch := func(network string) *Trace {
		t.Helper()
		cfg := Config{Steps: []RouteStep{StepDirect}, DNS: w.dnsConfig(), Race: RaceConfig{AssumeH3: true, TCPDelay: 10 * time.Second}}
		cfg.DNS.CacheFile = path
		opts := w.options(t)
		opts.NetworkName = func() string { return network }
		tp, err := New(cfg, opts)
		must(t, err)
		defer tp.Close()
		_, tr := mustGet(t, tp, url)
		return tr
	}
	h3Failed := func(tr *Trace) bool {
		return slices.ContainsFunc(tr.Failures, func(f Failure) bool { return f.Protocol == ProtocolH3 })
	}
	if tr := launch("wifi:home"); !h3Failed(tr) || tr.Protocol != "h2" {
		t.Fatalf("first launch: %s; want a failed QUIC attempt, then h2", tr)
	}
	if tr := launch("wifi:home"); h3Failed(tr) || tr.Protocol != "h2" {
		t.Fatalf("second launch on the same network: %s; want h2 without a QUIC attempt", tr)
	}
	if tr := launch("cellular"); !h3Failed(tr) {
		t.Fatalf("launch on another network: %s; want QUIC tried", tr)
	}
	if tr := launch("wifi:home"); h3Failed(tr) {
		t.Fatalf("back home: %s; want the home memory kept", tr)
	}
}

// A node's Alt-Svc advertisement of h3 is learnt from a response over TCP
// and persisted: the next launch races QUIC to it from the first request.
func TestAltSvcLearntAndPersisted(t *testing.T) {
	w := newWorld(t)
	n := w.node(t, "n", lmtest.NodeOptions{AdvertiseH3: true})
	path := filepath.Join(t.TempDir(), "lastmile.json")
	url := "https://api.test:" + strconv.Itoa(port(n.Addr())) + "/"
	launch := func() string {
		cfg := Config{Steps: []RouteStep{StepDirect}, DNS: w.dnsConfig(), Race: RaceConfig{TCPDelay: 10 * time.Second}}
		cfg.DNS.CacheFile = path
		tp, err := New(cfg, w.options(t))
		must(t, err)
		defer tp.Close()
		body, _ := mustGet(t, tp, url)
		return body
	}
	if b := launch(); b != "n HTTP/2.0" {
		t.Fatalf("first launch: %q, want TCP (h3 not advertised yet)", b)
	}
	if b := launch(); b != "n HTTP/3.0" {
		t.Fatalf("second launch: %q, want HTTP/3 (advertised by the first launch's response)", b)
	}
}
