package gateway

import (
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/internal/metrictest"
)

// TestLimitRejectionsCountedByTier: a request the limits refuse is counted
// in veer_limit_rejected_total under the tier shedding would give it: the
// one it stated, else its caller's in the criticality table, else the
// default tier.
func TestLimitRejectionsCountedByTier(t *testing.T) {
	a := upstream(t, func(w http.ResponseWriter, r *http.Request) {})
	reg := prometheus.NewRegistry()
	g := startGatewayOpts(t, parseConfig(t, fill(`
routes: [{name: r, clusters: [{name: a}]}]
clusters: [{name: a, backends: [{address: A}]}]
trusted_networks: [127.0.0.0/8]
shed:
  enabled: true
  default_tier: sheddable_plus
  endpoints: [{name: r, callers: {checkout: critical}}]
limits:
  keys: ["header:X-Tenant"]
  dimensions: [{name: tenant, default: {rate: 0.001, burst: 1}}]
`, "A", a)), Options{Registerer: reg})
	base := "http://" + g.Addrs().Plain
	cl := &http.Client{}
	if resp, _ := get(t, cl, base+"/", "X-Tenant", "acme"); resp.StatusCode != 200 {
		t.Fatalf("first request: %d", resp.StatusCode)
	}
	for _, st := range []struct {
		hdr  []string
		tier string
	}{
		{[]string{"Veer-Criticality", "sheddable"}, "sheddable"}, // stated
		{[]string{"Rpc-Caller", "checkout"}, "critical"},         // the table's
		{nil, "sheddable_plus"},                                  // the default
		{[]string{"Rpc-Caller", "checkout"}, "critical"},
	} {
		resp, _ := get(t, cl, base+"/", append([]string{"X-Tenant", "acme"}, st.hdr...)...)
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("%v: %d, want 429", st.hdr, resp.StatusCode)
		}
	}
	for tier, want := range map[string]float64{"sheddable": 1, "critical": 2, "sheddable_plus": 1, "critical_plus": 0, "unset": 0} {
		if got := metrictest.Sum(t, reg, "veer_limit_rejected_total", map[string]string{"dimension": "tenant", "tier": tier}); got != want {
			t.Errorf("rejected{tier=%s} = %v, want %v", tier, got, want)
		}
	}
}
