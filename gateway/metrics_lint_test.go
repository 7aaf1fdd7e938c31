package gateway

import (
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/obs"
)

// TestMetricsLint: every series the gateway registers, with traffic through
// each guard, follows the naming rules (veer_<pkg>_<what> with a unit, no
// tenant, user, device, caller or address label): obs.Lint, as the other
// libraries' metric tests run it.
func TestMetricsLint(t *testing.T) {
	a, _ := echoUpstream(t, "a")
	reg := prometheus.NewRegistry()
	cfg := parseConfig(t, fill(`
routes:
  - {name: api, clusters: [{name: c}, {name: d}], slo: {availability: 99.9, latency: 250ms}}
clusters:
  - {name: c, backends: [{address: A}], health: {path: /}}
  - {name: d, backends: [{address: DEAD}]}
limits:
  keys: [route]
  dimensions: [{name: route, default: {rate: 1000}}]
  max_request_body: 1024
shed: {enabled: true}
breaker: {enabled: true}
`, "A", a, "DEAD", deadAddr(t)))
	g := startGatewayOpts(t, cfg, Options{Registerer: reg})
	base := "http://" + g.Addrs().Plain
	for _, path := range []string{"/x", "/.well-known/veer/health"} {
		resp, _ := get(t, &http.Client{}, base+path)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
	}
	if errs := obs.Lint(reg); len(errs) > 0 {
		t.Fatalf("metric naming: %v", errs)
	}
}
