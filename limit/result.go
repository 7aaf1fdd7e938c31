package limit

import (
	"context"
	"errors"
	"time"

	"github.com/veerhq/veer/outcome"
)

// Admitter decides admission for one request. keys[i] is the request's key
// in dimension i of the config; an empty key (or a missing one) skips the
// dimension, and keys past the config's dimensions are ignored. Admit must
// return promptly: a remote Admitter bounds its wait by ctx and its own
// timeout, and falls back to a local decision rather than admitting
// without limit. On Allowed, the caller must call
// Result.Permit.Release once the request has finished.
type Admitter interface {
	Admit(ctx context.Context, keys []string) Result
}

// Reason is why a request was rejected.
type Reason uint8

// The reasons.
const (
	None Reason = iota
	Rate
	Concurrency
)

func (r Reason) String() string {
	switch r {
	case Rate:
		return "rate"
	case Concurrency:
		return "concurrency"
	}
	return "none"
}

// ErrLimited is matched (errors.Is) by every *RejectError.
var ErrLimited = errors.New("limit: request limited")

// RejectError describes a rejection.
type RejectError struct {
	Dimension  string
	Reason     Reason
	RetryAfter time.Duration
}

func (e *RejectError) Error() string {
	return "limit: " + e.Reason.String() + " limit of dimension " + e.Dimension + " reached"
}

// Is reports target == ErrLimited.
func (e *RejectError) Is(target error) bool { return target == ErrLimited }

// Result is an admission decision.
type Result struct {
	// Permit must be released when an admitted request finishes.
	Permit Permit
	// Allowed reports admission.
	Allowed bool
	// Dimension names the rejecting dimension, Key its key.
	Dimension, Key string
	// Reason of the rejection.
	Reason Reason
	// RetryAfter: when the rejecting limit would admit the request.
	RetryAfter time.Duration
}

// Err returns nil when allowed, else a *RejectError.
func (r *Result) Err() error {
	if r.Allowed {
		return nil
	}
	return &RejectError{Dimension: r.Dimension, Reason: r.Reason, RetryAfter: r.RetryAfter}
}

// Outcome is the rejection as an outcome (Limited with Retry-After), for
// outcome.WriteHTTP and outcome.GRPCCode.
func (r *Result) Outcome() outcome.Outcome {
	if r.Allowed {
		return outcome.Of(outcome.Success)
	}
	return outcome.Outcome{Kind: outcome.Limited, RetryAfter: r.RetryAfter, Err: r.Err()}
}

// Permit holds the concurrency slots of an admitted request.
type Permit struct {
	conc    [MaxDimensions]*entry
	n       uint8
	release func()
}

// Release gives the slots back. Call it once per admitted request; later
// calls do nothing.
func (p *Permit) Release() {
	for i := range p.n {
		p.conc[i].inflight.Add(-1)
		p.conc[i] = nil
	}
	p.n = 0
	if f := p.release; f != nil {
		p.release = nil
		f()
	}
}

// WithRelease returns p that also calls f on Release; remote Admitters use
// it to return leases.
func (p Permit) WithRelease(f func()) Permit {
	if prev := p.release; prev != nil {
		p.release = func() { prev(); f() }
	} else {
		p.release = f
	}
	return p
}
