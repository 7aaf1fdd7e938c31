package lastmile

import (
	"context"
	"time"

	"github.com/veerhq/veer/outcome"
)

// runSteps runs the route steps in order, staggered (Config.Stagger): a
// step that has no route after the stagger gets the next step started
// beside it, a step that fails at once; the first route wins. On a cold
// start (the scheduler's answer not cached) the direct step starts with the
// scheduler step, not a stagger later: the scheduler's request costs its
// own DNS, connection and round trip before any node is tried. Each step
// runs on its own discovery (its skipped nodes are merged when it ends).
// The error is nil with a route, else the last failure (or a skip).
func (t *Transport) runSteps(ctx context.Context, d *discovery) (*route, error) {
	var steps []RouteStep
	for _, s := range t.cfg.Steps {
		if routeSteps[s] != nil {
			steps = append(steps, s)
		}
	}
	if len(steps) == 0 {
		return nil, errSkip
	}
	subs := make([]*discovery, len(steps))
	for i := range steps {
		subs[i] = &discovery{k: d.k, network: d.network, host: d.host, port: d.port, tr: d.tr}
	}
	coldSched := t.sched != nil && !t.sched.cached(d.host)
	delay := func(i int) time.Duration {
		if steps[i] == StepScheduler && coldSched && i+1 < len(steps) && steps[i+1] == StepDirect {
			return 0
		}
		return t.cfg.Stagger
	}
	run := func(ctx context.Context, i int) (*route, error) {
		return routeSteps[steps[i]](t, ctx, subs[i])
	}
	done := func(i int, err error) {
		d.skipped = append(d.skipped, subs[i].skipped...)
		if err != nil {
			t.failStep(d, steps[i], err)
		}
	}
	return staggered(ctx, t.clk, len(steps), delay, run, done)
}

// failStep records a route step's failure (unless it was not configured or
// every candidate was skipped).
func (t *Transport) failStep(d *discovery, step RouteStep, err error) {
	if isSkip(err) {
		return
	}
	kind := outcome.ClassifyError(err)
	d.tr.fail(Failure{Route: step, Target: d.k.host, Kind: kind, Err: err})
	t.m.fail(string(step), kind)
}
