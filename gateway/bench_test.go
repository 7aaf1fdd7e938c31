package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/obs"
)

// BenchmarkServe measures one request through the gateway's handler to a
// keep-alive backend, beside a tuned httputil.ReverseProxy doing the same
// (sub-benchmarks /veer, /veer-guards with the guards of make
// bench-gateway's "veer guards", and /reverseproxy). Compare them with
// benchstat; the ratio, not the absolute figure, is what means something on
// a shared machine. One request at a time: the cost of the guards under
// concurrency (shed's queue and yield) does not show here; see
// docs/gateway.md.
func BenchmarkServe(b *testing.B) {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok\n") }))
	defer be.Close()
	addr := be.Listener.Addr().String()
	gw := func(extra string) *Gateway {
		var cfg Config
		if err := config.Parse([]byte("listen: {addr: 'off'}\nroutes: [{name: r, clusters: [{name: c}]}]\nclusters: [{name: c, backends: [{address: '"+addr+"'}]}]\n"+extra), "b", &cfg); err != nil {
			b.Fatal(err)
		}
		g, err := New(cfg, Options{Logger: obs.Discard, Registerer: prometheus.NewRegistry()})
		if err != nil {
			b.Fatal(err)
		}
		return g
	}
	g := gw("retry: {disabled: true}\n")
	defer g.Close()
	gg := gw(`limits:
  keys: [route, client_ip]
  dimensions:
    - {name: route, default: {rate: 1000000, concurrency: 100000}}
    - {name: client, default: {rate: 1000000}}
  max_request_body: 1048576
shed: {enabled: true, default_tier: critical}
breaker: {enabled: true}
retry: {policy: {max_attempts: 3}}
`)
	defer gg.Close()
	u, _ := url.Parse("http://" + addr)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}
	for _, c := range []struct {
		name string
		h    http.Handler
	}{{"veer", g}, {"veer-guards", gg}, {"reverseproxy", rp}} {
		b.Run(c.name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, "http://example.com/x", nil)
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				c.h.ServeHTTP(w, req)
				if w.Code != 200 {
					b.Fatal(w.Code)
				}
			}
		})
	}
}
