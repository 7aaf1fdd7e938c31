package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/gateway/internal/h1"
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
	guards, err := os.ReadFile("../bench/gateway/guards.yaml") // make bench-gateway's "veer guards"
	if err != nil {
		b.Fatal(err)
	}
	gg := gw(string(guards))
	defer gg.Close()
	// the same bare gateway with http.Transport upstream instead of the
	// gateway's own HTTP/1.1 client
	gs := gw("retry: {disabled: true}\n")
	defer gs.Close()
	sc := gs.snap.Load().clusters["c"]
	sc.transport = sc.transport.(*h1.Client).Fallback()
	u, _ := url.Parse("http://" + addr)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}
	for _, c := range []struct {
		name string
		h    http.Handler
	}{{"veer", g}, {"veer-guards", gg}, {"veer-httptransport", gs}, {"reverseproxy", rp}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := processCPU(b)
			b.SetParallelism(32) // 64 requests in flight on the 2 cores of the reference machine
			b.RunParallel(func(pb *testing.PB) {
				req := httptest.NewRequest(http.MethodGet, "http://example.com/x", nil)
				for pb.Next() {
					w := httptest.NewRecorder()
					c.h.ServeHTTP(w, req)
					if w.Code != 200 {
						b.Error(w.Code)
						return
					}
				}
			})
			// CPU time of the whole process (handler, backend, client) per
			// request: steadier than ns/op on a shared machine
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}
