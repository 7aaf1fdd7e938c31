// Package release is gray release with automatic rollback (seed 003: "let
// probe customers in first, then the rest; ring-by-ring, blue-green"): the
// plan of a rollout, which tenant a step sends to the new version, and the
// analysis that promotes or aborts a step from the outcomes the gateways
// counted.
//
//	p := release.Plan{Route: "api", From: "v1", To: "v2", CanaryTenants: []string{"acme"}}
//	r, err := release.Start(p, now, "v2: new pricing")    // draining v2: everyone on v1
//	if ok, why := release.DrainDone(r, gateways, counts, now); ok {
//		r = r.EndDrain(now, why)                           // step 0: the canary tenants on v2
//	}
//	v := release.Judge(r.Plan, countsA, countsB, now.Sub(r.StepStarted))
//	r = r.Apply(v, now)                                      // next ring, done, or aborted
//	if r.Assign(tenant) == release.B { /* send to p.To */ }
//
// Contract: everything here is pure and takes the time as an argument; a
// Rollout is a value (the store document gateways follow). Assign is stable:
// a tenant's slot (Slot) depends only on the route and the tenant key, so a
// tenant is served by one version for the whole of a step, widening a ring
// only moves tenants from A to B, and every gateway agrees without talking
// to the others. A rollout begins by draining B (unless Plan.NoDrain)
// until every gateway reports nothing in flight on it, or
// Plan.DrainTimeout. Judge is Wald's sequential probability ratio test on
// B's error rate, on its share of slow requests and on its share of
// answers over about twice A's observed p99 (the tail test, on the latency
// histograms in Counts), against A's measured in the same step: a bad version is stopped as soon as the evidence suffices
// (with the defaults, a few failures more than A's rate explains), not
// after a fixed analysis interval; a healthy one is promoted after
// SLO.MinSamples once the evidence leans clearly to "as good as A".
//
// Failure mode: a step that cannot show B as good as A within Plan.Hold
// (too little traffic, or a rate between the two hypotheses) is aborted,
// never promoted by default: rolling back costs a retry of the release,
// promoting a bad version costs the users.
package release
