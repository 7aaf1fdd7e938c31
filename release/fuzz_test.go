package release

import (
	"encoding/json"
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

// FuzzParseRollout: a release document either is refused with an error or
// gives a rollout whose Serving step Assign accepts, and which survives a
// JSON round trip unchanged in what gateways apply.
func FuzzParseRollout(f *testing.F) {
	r, _ := Start(Plan{Route: "api", From: "v1", To: "v2", CanaryTenants: []string{"acme"}}, time.Unix(1, 0), "seed")
	good, _ := json.Marshal(r)
	f.Add(good)
	f.Add([]byte(`{"plan":{"route":"api","from":"a","to":"b","blue_green":true},"id":"1","status":"done"}`))
	f.Add([]byte(`{"plan":{"route":"api","from":"a","to":"b"},"id":"1","status":"running","step":-1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseRollout(data, "release/api")
		if err != nil {
			return
		}
		v := r.Assign("tenant")
		if v != A && v != B {
			t.Fatalf("version %d", v)
		}
		again, _ := json.Marshal(r)
		r2, err := ParseRollout(again, "release/api")
		if err != nil || r2.Serving() != r.Serving() || r2.Assign("tenant") != v {
			t.Fatalf("round trip: %+v, %v", r2, err)
		}
	})
}
