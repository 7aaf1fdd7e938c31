package release

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// CountsPrefix prefixes the gateways' published counts in the control
// plane's store: CountsPrefix+route+"/"+gateway holds one gateway's
// StepCounts of the route's current rollout step.
const CountsPrefix = "release-counts/"

// CountsKey is the store key of gateway's counts of route.
func CountsKey(route, gateway string) string { return CountsPrefix + route + "/" + gateway }

// StepCounts are one gateway's counts of one step of one rollout: what a
// gateway publishes and the control plane pools.
type StepCounts struct {
	Route string `json:"route"`
	ID    string `json:"id"`
	Step  int    `json:"step"`
	A     Counts `json:"a"`
	B     Counts `json:"b"`
	// Draining: the gateway applies the rollout's drain (B's cluster
	// drained, every tenant on A); InFlightB is then the number of
	// requests in flight on B's cluster at the gateway (any route), 0 at
	// other times.
	Draining  bool  `json:"draining,omitempty"`
	InFlightB int64 `json:"in_flight_b,omitempty"`
}

// DrainDone says whether the drain that begins rollout r is over at now:
// every gateway in gateways (the announced ones; none: those that
// published counts of r) published counts of r's drain with nothing in
// flight on B, or r.Plan.DrainTimeout has passed since the drain began.
// The reason names the figures either way (the gateways still busy or
// silent while it is not over).
func DrainDone(r Rollout, gateways []string, counts map[string]StepCounts, now time.Time) (bool, string) {
	if !r.Draining {
		return true, "not draining"
	}
	if len(gateways) == 0 {
		for gw, c := range counts {
			if c.ID == r.ID {
				gateways = append(gateways, gw)
			}
		}
		slices.Sort(gateways)
	}
	var busy []string
	for _, gw := range gateways {
		c, ok := counts[gw]
		switch {
		case !ok || c.ID != r.ID || !c.Draining:
			busy = append(busy, gw+" (not reported)")
		case c.InFlightB > 0:
			busy = append(busy, fmt.Sprintf("%s (%d in flight)", gw, c.InFlightB))
		}
	}
	timeout := r.Plan.withDefaults().DrainTimeout
	switch {
	case len(busy) == 0 && len(gateways) == 0:
		return true, "no gateway announced or reporting"
	case len(busy) == 0:
		return true, fmt.Sprintf("%s idle on every gateway (%d: %s)", r.Plan.To, len(gateways), strings.Join(gateways, ", "))
	case now.Sub(r.StepStarted) >= timeout:
		return true, fmt.Sprintf("drain timeout %v over; not idle: %s", timeout, strings.Join(busy, ", "))
	}
	return false, "waiting for " + strings.Join(busy, ", ")
}

// Pool adds up the counts of rollout id at step, ignoring the others (an
// earlier step, an earlier rollout, a gateway that has not seen the step
// yet), and returns how many documents it pooled.
func Pool(all []StepCounts, id string, step int) (a, b Counts, n int) {
	for _, c := range all {
		if c.ID == id && c.Step == step {
			a, b = a.Add(c.A), b.Add(c.B)
			n++
		}
	}
	return a, b, n
}

// ParseRollout decodes a release document (JSON, as the control plane
// writes it) and validates its plan; name is used in the error.
func ParseRollout(data []byte, name string) (Rollout, error) {
	var r Rollout
	if err := json.Unmarshal(data, &r); err != nil {
		return Rollout{}, fmt.Errorf("%s: %w", name, err)
	}
	if err := r.Plan.Validate(); err != nil {
		return Rollout{}, fmt.Errorf("%s: plan: %w", name, err)
	}
	if r.ID == "" {
		return Rollout{}, fmt.Errorf("%s: id: required", name)
	}
	switch r.Status {
	case Running, Paused, Aborted, Done:
	default:
		return Rollout{}, fmt.Errorf("%s: status: %q: want running, paused, aborted or done", name, r.Status)
	}
	if r.Step < 0 || r.Step >= r.Plan.Steps() {
		return Rollout{}, fmt.Errorf("%s: step: %d: the plan has steps 0..%d", name, r.Step, r.Plan.Steps()-1)
	}
	return r, nil
}
