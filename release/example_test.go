package release_test

import (
	"fmt"
	"time"

	"github.com/veerhq/veer/release"
)

// A rollout of v2 on the route "api": B drained until the gateways report
// it idle, the canary tenant first, then rings; a step whose B fails far
// more than A is aborted and everyone is back on A.
func Example() {
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	p := release.Plan{Route: "api", From: "v1", To: "v2", CanaryTenants: []string{"acme"}}
	r, err := release.Start(p, now, "v2: new pricing")
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Status, "draining", r.Draining, "acme on", r.Assign("acme"))

	// a second later both gateways report nothing in flight on v2
	now = now.Add(time.Second)
	counts := map[string]release.StepCounts{
		"gw-a": {Route: "api", ID: r.ID, Step: -1, Draining: true},
		"gw-b": {Route: "api", ID: r.ID, Step: -1, Draining: true},
	}
	if done, why := release.DrainDone(r, []string{"gw-a", "gw-b"}, counts, now); done {
		r = r.EndDrain(now, why)
	}
	fmt.Println(r.Reason)
	fmt.Println(r.Status, "step", r.Step, "acme on", r.Assign("acme"), "globex on", r.Assign("globex"))

	// 30 s later the gateways' pooled counts: B failed 6 of 150, A 20 of 10 000.
	now = now.Add(30 * time.Second)
	v := r.Judge(release.Counts{Requests: 10000, Errors: 20}, release.Counts{Requests: 150, Errors: 6}, now)
	r = r.Apply(v, now)
	fmt.Println(r.Status, "acme on", r.Assign("acme"))
	fmt.Println(r.Reason)
	// Output:
	// running draining true acme on a
	// drained: v2 idle on every gateway (2: gw-a, gw-b)
	// running step 0 acme on b globex on a
	// aborted acme on a
	// step 0: abort: error rate above A's + 0.01: B 6 errors and 0 slow of 150; A 20 and 0 of 10000
}
