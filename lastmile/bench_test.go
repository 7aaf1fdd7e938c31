package lastmile

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"

	"github.com/veerhq/veer/lastmile/lmtest"
)

// BenchmarkRoundTrip measures a request over a connected route against a
// plain http.Transport to the same HTTP/2 node, so that the difference is
// lastmile's per-request cost once connected (route lookup, failure count,
// trace check). Run: go test -run '^$' -bench RoundTrip -benchmem -count 10 ./lastmile/
func BenchmarkRoundTrip(b *testing.B) {
	w := &world{dnsEnv: newDNSEnv(b, apiRecords)}
	n, err := lmtest.NewNode("n", w.ca, lmtest.NodeOptions{Names: nodeNames})
	must(b, err)
	b.Cleanup(func() { n.Close() })
	url := "https://api.test:" + strconv.Itoa(port(n.Addr())) + "/"

	plain := &http.Transport{
		DialContext:       (&net.Dialer{Resolver: w.public.Resolver()}).DialContext,
		TLSClientConfig:   tlsConfig(w.ca),
		ForceAttemptHTTP2: true,
	}
	b.Cleanup(plain.CloseIdleConnections)
	opts := w.options(b)
	cfgs := map[string]Config{"h2": {Race: RaceConfig{DisableH3: true}}, "h3": {Race: RaceConfig{AssumeH3: true}}} // the node does not advertise h3
	run := func(b *testing.B, rt http.RoundTripper) {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
		for b.Loop() {
			resp, err := rt.RoundTrip(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	b.Run("plain-h2", func(b *testing.B) { run(b, plain) })
	for _, name := range []string{"h2", "h3"} {
		b.Run("lastmile-"+name, func(b *testing.B) {
			tp, err := New(cfgs[name], opts)
			must(b, err)
			defer tp.Close()
			run(b, tp)
		})
	}
}

// BenchmarkRouteLookup is the per-request work lastmile adds in front of
// the node's transport once a route exists.
func BenchmarkRouteLookup(b *testing.B) {
	tp, err := New(Config{}, Options{Registerer: nil, Logger: nil})
	must(b, err)
	defer tp.Close()
	k := routeKey{tls: true, host: "api.test"}
	tp.setRoute(k, &route{})
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "https://api.test/", nil)
	b.ReportAllocs()
	for b.Loop() {
		key := routeKey{tls: req.URL.Scheme != "http", host: req.URL.Host}
		r := (*tp.routes.Load())[key]
		tr := TraceFrom(req.Context())
		if r == nil || tr != nil {
			b.Fatal("no route")
		}
		tp.servedRoute.Inc()
		if r.failures.Load() != 0 {
			r.failures.Store(0)
		}
	}
}

// BenchmarkColdStart measures time to first byte of a cold start (new
// transport, first request, connection setup included) when nothing fails:
// plain http.Transport against lastmile's direct step.
// Run: go test -run '^$' -bench ColdStart -benchmem -count 10 ./lastmile/
func BenchmarkColdStart(b *testing.B) {
	w := &world{dnsEnv: newDNSEnv(b, apiRecords)}
	n, err := lmtest.NewNode("n", w.ca, lmtest.NodeOptions{Names: nodeNames})
	must(b, err)
	b.Cleanup(func() { n.Close() })
	url := "https://api.test:" + strconv.Itoa(port(n.Addr())) + "/"
	opts := w.options(b)
	first := func(b *testing.B, rt http.RoundTripper) {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	b.Run("plain-h2", func(b *testing.B) {
		for b.Loop() {
			plain := &http.Transport{
				DialContext:       (&net.Dialer{Resolver: w.public.Resolver()}).DialContext,
				TLSClientConfig:   tlsConfig(w.ca),
				ForceAttemptHTTP2: true,
			}
			first(b, plain)
			plain.CloseIdleConnections()
		}
	})
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"lastmile-h2", Config{Steps: []RouteStep{StepDirect}, Race: RaceConfig{DisableH3: true}}},
		{"lastmile-h3", Config{Steps: []RouteStep{StepDirect}, Race: RaceConfig{AssumeH3: true}}}, // the node does not advertise h3
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				tp, err := New(c.cfg, opts)
				must(b, err)
				first(b, tp)
				tp.Close()
			}
		})
	}
}
