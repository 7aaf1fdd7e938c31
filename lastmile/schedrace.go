package lastmile

import (
	"context"
	"errors"

	"github.com/veerhq/veer/outcome"
)

// schedulerRacingDirect runs the scheduler step and, when the scheduler's
// answer is not cached (a cold start), the direct step beside it: the
// scheduler's request costs its own DNS, connection and round trip before
// any node is tried, the direct path only the node's. The first route
// wins; when both are ready at once the scheduler's is taken (the seed's
// order). The direct step is then not run again in this chain run. A
// scheduler path that loses finishes in the background: its answer is
// cached for the next chain run.
func (t *Transport) schedulerRacingDirect(ctx context.Context, d *discovery) (*route, error) {
	if t.sched == nil {
		return nil, errSkip
	}
	if t.sched.cached(d.host) {
		return t.schedulerStep(ctx, d)
	}
	d.done[StepDirect] = true
	type result struct {
		step RouteStep
		d    *discovery
		r    *route
		err  error
	}
	results := make(chan result, 2)
	for _, step := range []RouteStep{StepScheduler, StepDirect} {
		sub := &discovery{k: d.k, network: d.network, host: d.host, port: d.port, tr: d.tr, done: d.done}
		t.runs.Add(1)
		go func() {
			defer t.runs.Done()
			r, err := routeSteps[step](t, ctx, sub)
			results <- result{step, sub, r, err}
		}()
	}
	var sched, direct *result
	for sched == nil || direct == nil {
		res := <-results
		d.skipped = append(d.skipped, res.d.skipped...)
		if res.step == StepScheduler {
			sched = &res
		} else {
			direct = &res
		}
		if res.err == nil {
			if res.step == StepDirect {
				// Both ready: the scheduler's route goes first.
				select {
				case s := <-results:
					d.skipped = append(d.skipped, s.d.skipped...)
					if s.err == nil {
						return s.r, nil
					}
					t.failStep(d, s.step, s.err)
				default:
				}
			}
			return res.r, nil
		}
	}
	// Both failed: the direct step's failure is recorded here, the
	// scheduler's by the chain.
	t.failStep(d, StepDirect, direct.err)
	return nil, sched.err
}

// failStep records a route step's failure (unless it was not configured or
// every candidate was skipped).
func (t *Transport) failStep(d *discovery, step RouteStep, err error) {
	if errors.Is(err, errSkip) || errors.Is(err, ErrSkippedBroken) {
		return
	}
	kind := outcome.ClassifyError(err)
	d.tr.fail(Failure{Route: step, Target: d.k.host, Kind: kind, Err: err})
	t.m.fail(string(step), kind)
}
