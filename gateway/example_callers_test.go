package gateway_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/gateway"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/tier"
)

// The callers a gateway saw per route over the last hour, with the tier
// its shed table gives each: what GET /admin/callers serves and the
// console's criticality page pre-fills.
func ExampleGateway_Callers() {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer be.Close()
	yaml := fmt.Sprintf(`
shed: {enabled: true, endpoints: [{name: api, callers: {rider-app: critical}}]}
trusted_networks: [192.0.2.0/24] # httptest's client address; elsewhere Rpc-Caller is stripped
routes: [{name: api, clusters: [{name: c}]}]
clusters: [{name: c, backends: [{address: %q}]}]
`, be.Listener.Addr().String())
	var cfg gateway.Config
	if err := config.Parse([]byte(yaml), "gateway.yaml", &cfg); err != nil {
		fmt.Println(err)
		return
	}
	g, err := gateway.New(cfg, gateway.Options{Logger: obs.Discard, Registerer: prometheus.NewRegistry()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer g.Close()
	for _, caller := range []string{"rider-app", "rider-app", "batch"} {
		r := httptest.NewRequest(http.MethodGet, "http://example.com/", nil)
		r.Header.Set(tier.CallerHeader, caller)
		g.ServeHTTP(httptest.NewRecorder(), r)
	}
	for _, e := range g.Callers().Endpoints {
		for _, c := range e.Callers {
			fmt.Println(e.Endpoint, c.Caller, c.Count, c.Tier)
		}
	}
	// Output:
	// api rider-app 2 critical
	// api batch 1 sheddable_plus
}
