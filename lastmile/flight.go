package lastmile

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/veerhq/veer/outcome"
)

// A chain run for a host is shared by every request that needs a route to
// it while it runs (single flight, for failure as for success), and it runs
// on the Transport's own context, not on any caller's: a caller whose
// deadline passes or who cancels stops waiting, the run goes on (bounded by
// its steps' timeouts) so that what it learns (a working route, a broken
// protocol, a failed chain) serves the next request. A failed run is
// remembered for Config.NoRouteHold: requests in that time fail at once
// with the same error instead of paying the chain again.

// flight is one chain run and its result, published by closing done.
type flight struct {
	done chan struct{}
	tr   *Trace // the run's own record, copied into each waiter's Trace
	r    *route
	err  error
}

// failedRun is a remembered failed chain run.
type failedRun struct {
	err   error
	trace record
	until time.Time
}

// ErrDiscoveryDeadline is wrapped (as outcome.DialCanceled, a network
// failure) when a request's deadline passed while its route was still
// being discovered: the host did not answer in time, the caller did not
// cancel.
var ErrDiscoveryDeadline = errors.New("lastmile: request deadline passed during route discovery")

// discover returns a route for k: the working one, or the result of the
// chain run in flight for k (starting one if none runs), or the remembered
// failure of a recent run.
func (t *Transport) discover(ctx context.Context, k routeKey, tr *Trace) (*route, error) {
	if tr != nil {
		tr.mu.Lock()
		tr.Host = k.host
		tr.mu.Unlock()
	}
	t.mu.Lock()
	if r := (*t.routes.Load())[k]; r != nil {
		t.mu.Unlock()
		tr.fill(k.host, StepRoute, r, 0)
		return r, nil
	}
	if f, ok := t.failed[k]; ok {
		if t.clk.Now().Before(f.until) {
			t.mu.Unlock()
			tr.add(f.trace)
			return nil, f.err
		}
		delete(t.failed, k)
	}
	f := t.flights[k]
	if f == nil {
		if t.closed {
			t.mu.Unlock()
			return nil, outcome.Wrap(outcome.ClientCanceled, errClosed)
		}
		f = &flight{done: make(chan struct{}), tr: &Trace{Host: k.host}}
		t.flights[k] = f
		t.runs.Add(1)
		go t.run(k, f)
	}
	t.mu.Unlock()
	select {
	case <-f.done:
		tr.add(f.tr.record())
		if f.err != nil {
			return nil, f.err
		}
		tr.fill(k.host, f.tr.Served, f.r, f.tr.Chain)
		return f.r, nil
	case <-ctx.Done():
		tr.add(f.tr.record())
		return nil, waitError(ctx, k.host)
	}
}

// run executes one chain run for k and publishes its result.
func (t *Transport) run(k routeKey, f *flight) {
	defer t.runs.Done()
	network := t.network.Load()
	r, err := t.chain(WithTrace(t.bg, f.tr), k, f.tr)
	t.mu.Lock()
	delete(t.flights, k)
	if err != nil && t.cfg.NoRouteHold > 0 && t.bg.Err() == nil && t.network.Load() == network {
		t.failed[k] = failedRun{err: err, trace: f.tr.record(), until: t.clk.Now().Add(t.cfg.NoRouteHold)}
	}
	t.mu.Unlock()
	f.r, f.err = r, err
	close(f.done)
}

// waitError is the error of a request that stopped waiting for a chain run:
// its own cancellation is ClientCanceled; its deadline is DialCanceled, a
// network failure of the host (failover counts it).
func waitError(ctx context.Context, host string) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return outcome.Wrap(outcome.DialCanceled, fmt.Errorf("%w: %s: %w", ErrDiscoveryDeadline, host, ctx.Err()))
	}
	return outcome.Wrap(outcome.ClientCanceled, fmt.Errorf("lastmile: %s: %w", host, context.Cause(ctx)))
}

var errClosed = errors.New("lastmile: transport closed")

// record is what a chain run recorded: its failures and skips.
type record struct {
	failures []Failure
	skipped  []Skip
}

// record returns a copy of t's failures and skips.
func (t *Trace) record() record {
	t.mu.Lock()
	defer t.mu.Unlock()
	return record{append([]Failure(nil), t.Failures...), append([]Skip(nil), t.Skipped...)}
}

// add appends a run's record to t.
func (t *Trace) add(r record) {
	if t == nil || len(r.failures)+len(r.skipped) == 0 {
		return
	}
	t.mu.Lock()
	t.Failures = append(t.Failures, r.failures...)
	t.Skipped = append(t.Skipped, r.skipped...)
	t.mu.Unlock()
}
