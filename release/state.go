package release

import (
	"fmt"
	"time"
)

// KeyPrefix prefixes the release documents in the control plane's store:
// KeyPrefix+route holds a Rollout.
const KeyPrefix = "release/"

// Status of a rollout.
type Status string

// The statuses.
const (
	Running Status = "running"
	Paused  Status = "paused"  // the step stays; the analysis waits
	Aborted Status = "aborted" // every tenant back on A
	Done    Status = "done"    // every tenant on B
)

// Rollout is a release in progress: its plan and where it stands. It is
// the document gateways follow (they apply Serving()) and the control
// plane advances (Step, with Judge's verdicts).
type Rollout struct {
	Plan Plan `json:"plan"`
	// ID names this rollout of the route (its start time in nanoseconds
	// when started by Start): counts are kept per ID and step, so that a
	// new rollout never reads an old one's.
	ID          string    `json:"id"`
	Status      Status    `json:"status"`
	Step        int       `json:"step"`
	Started     time.Time `json:"started"`
	StepStarted time.Time `json:"step_started"`
	// Draining: the rollout begins by draining B (unless Plan.NoDrain):
	// every tenant is on A and the gateways drain Plan.To until each
	// reports it idle (DrainDone) or Plan.DrainTimeout after StepStarted;
	// then EndDrain starts step 0.
	Draining bool `json:"draining,omitempty"`
	// Reason is why the rollout is where it is (the last verdict's reason,
	// or the operator's).
	Reason string `json:"reason,omitempty"`
	// Verdicts records each step's deciding verdict, in order.
	Verdicts []Verdict `json:"verdicts,omitempty"`
	// BaselineA pools A's counts of the steps already promoted: A's
	// version does not change during the rollout, and at the last rings
	// (100 %: no A traffic at all) its rate is known only from before.
	BaselineA Counts `json:"baseline_a"`
}

// Judge is release.Judge on the current step's counts, with A's counts
// pooled with the earlier steps' (BaselineA).
func (r Rollout) Judge(a, b Counts, now time.Time) Verdict {
	return Judge(r.Plan, r.BaselineA.Add(a), b, now.Sub(r.StepStarted))
}

// Start begins a rollout of p at now (the plan is validated first).
func Start(p Plan, now time.Time, reason string) (Rollout, error) {
	if err := p.Validate(); err != nil {
		return Rollout{}, err
	}
	return Rollout{Plan: p, ID: fmt.Sprint(now.UnixNano()), Status: Running, Started: now, StepStarted: now, Reason: reason, Draining: !p.NoDrain}, nil
}

// EndDrain ends the drain of a running rollout at now and starts step 0;
// a rollout that is not draining and running is returned as it is.
func (r Rollout) EndDrain(now time.Time, reason string) Rollout {
	if !r.Draining || r.Status != Running {
		return r
	}
	r.Draining, r.StepStarted, r.Reason = false, now, "drained: "+reason
	return r
}

// Serving is the step gateways apply: the current step while running or
// paused, the last when done, -1 (everyone on A) when aborted or while
// draining B.
func (r Rollout) Serving() int {
	switch {
	case r.Status == Aborted || r.Draining && r.Active():
		return -1
	case r.Status == Done:
		return r.Plan.Steps() - 1
	}
	return r.Step
}

// Assign says which version serves tenant now.
func (r Rollout) Assign(tenant string) Version {
	return Assign(r.Plan, r.Serving(), r.Plan.Route, tenant)
}

// Active reports whether the rollout still moves traffic (running or
// paused): a second rollout of the route is refused while it is.
func (r Rollout) Active() bool { return r.Status == Running || r.Status == Paused }

// Apply advances a running rollout by a verdict on its current step, at
// now: Promote moves to the next step (or Done after the last), Abort sends
// every tenant back to A, Continue changes nothing. A rollout that is not
// running, or still draining, is returned as it is.
func (r Rollout) Apply(v Verdict, now time.Time) Rollout {
	if r.Status != Running || r.Draining || v.Decision == Continue {
		return r
	}
	r.Verdicts = append(append([]Verdict(nil), r.Verdicts...), v)
	r.Reason = fmt.Sprintf("step %d: %s: %s", r.Step, v.Decision, v.Reason)
	if v.Decision == Abort {
		r.Status = Aborted
		return r
	}
	if r.Step+1 >= r.Plan.Steps() {
		r.Status = Done
		return r
	}
	r.Step++
	r.StepStarted = now
	r.BaselineA = v.A // Judge pooled them already
	return r
}

// Control is an operator's action on a rollout.
type Control string

// The operator's actions.
const (
	Pause  Control = "pause"
	Resume Control = "resume"
	Cancel Control = "abort"
)

// Do applies an operator's action with its reason; an action that does not
// fit the status (resume a running rollout, abort a finished one) is an
// error and changes nothing. Resume restarts the step's clock.
func (r Rollout) Do(c Control, now time.Time, reason string) (Rollout, error) {
	switch {
	case c == Pause && r.Status == Running:
		r.Status = Paused
	case c == Resume && r.Status == Paused:
		r.Status, r.StepStarted = Running, now
	case c == Cancel && r.Active():
		r.Status = Aborted
	default:
		return r, fmt.Errorf("release: cannot %s a %s rollout", c, r.Status)
	}
	r.Reason = fmt.Sprintf("%s by operator: %s", c, reason)
	return r, nil
}
