package release

import (
	"encoding/json"
	"fmt"
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
