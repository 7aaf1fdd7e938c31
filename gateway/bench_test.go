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
// (sub-benchmarks /veer and /reverseproxy). Compare the two with
// benchstat; the ratio, not the absolute figure, is what means something on
// a shared machine.
func BenchmarkServe(b *testing.B) {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok\n") }))
	defer be.Close()
	addr := be.Listener.Addr().String()
	var cfg Config
	if err := config.Parse([]byte("listen: {addr: 'off'}\nretry: {disabled: true}\nroutes: [{name: r, clusters: [{name: c}]}]\nclusters: [{name: c, backends: [{address: '"+addr+"'}]}]\n"), "b", &cfg); err != nil {
		b.Fatal(err)
	}
	g, err := New(cfg, Options{Logger: obs.Discard, Registerer: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	u, _ := url.Parse("http://" + addr)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}
	for _, c := range []struct {
		name string
		h    http.Handler
	}{{"veer", g}, {"reverseproxy", rp}} {
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
