package release

import (
	"testing"
	"time"

	"github.com/veerhq/veer/config"
)

// FuzzPlan: any document either fails to parse or validate with an error,
// or gives a plan whose steps assign every tenant to one version.
func FuzzPlan(f *testing.F) {
	f.Add([]byte("route: api\nfrom: v1\nto: v2\ncanary_tenants: [acme]\nrings: [1, 10, 100]\n"))
	f.Add([]byte(`{"route":"api","from":"a","to":"b","blue_green":true,"slo":{"max_error_rate":0.2}}`))
	f.Add([]byte("route: api\nfrom: v1\nto: v2\nrings: [50, 20]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var p Plan
		if err := config.Parse(data, "release.yaml", &p); err != nil {
			return
		}
		for step := -1; step <= p.Steps(); step++ {
			if v := Assign(p, step, p.Route, "tenant"); v != A && v != B {
				t.Fatalf("step %d: version %d", step, v)
			}
		}
		v := Judge(p, Counts{Requests: 10, Errors: 1}, Counts{Requests: 10, Errors: 5}, time.Hour)
		if v.Decision == Promote {
			t.Fatalf("promoted a B with half its requests failed: %+v", v)
		}
	})
}
