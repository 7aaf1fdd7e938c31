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

// FuzzJudgeCounts: the counts a gateway publishes (JSON, any shape,
// latency histograms of any length) never make Judge or DrainDone panic,
// and Judge always decides one of its three decisions.
func FuzzJudgeCounts(f *testing.F) {
	var a, b Counts
	for i := range 2000 {
		a.Observe(i%500 == 0, time.Duration(10+i%7)*time.Millisecond, DefaultSlowThreshold)
	}
	b.Observe(true, time.Second, DefaultSlowThreshold)
	ja, _ := json.Marshal(StepCounts{Route: "api", ID: "1", A: a, B: b, Draining: true, InFlightB: 2})
	f.Add(ja)
	f.Add([]byte(`{"route":"api","id":"1","a":{"requests":5,"latency":[-1,7]},"b":{"requests":-3,"latency":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,50,51,52,53,54,55,56]}}`))
	r, _ := Start(Plan{Route: "api", From: "v1", To: "v2"}, time.Unix(1, 0), "fuzz")
	f.Fuzz(func(t *testing.T, data []byte) {
		var c StepCounts
		if json.Unmarshal(data, &c) != nil {
			return
		}
		v := Judge(r.Plan, c.A, c.B, time.Minute)
		if v.Decision != Continue && v.Decision != Promote && v.Decision != Abort {
			t.Fatalf("decision %d", v.Decision)
		}
		c.ID = r.ID
		DrainDone(r, []string{"gw"}, map[string]StepCounts{"gw": c}, time.Unix(2, 0))
	})
}
