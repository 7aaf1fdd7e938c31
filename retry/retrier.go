package retry

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/outcome"
)

// Reasons a Call stops. Match them with errors.Is.
var (
	ErrAttempts     = errors.New("retry: attempts exhausted")
	ErrDeadline     = errors.New("retry: deadline would pass before the next attempt")
	ErrBudget       = errors.New("retry: retry budget exhausted")
	ErrUnsafe       = errors.New("retry: request may have reached the upstream and is not idempotent")
	ErrNotRetryable = errors.New("retry: outcome is not retryable")
	ErrRetryAfter   = errors.New("retry: server's Retry-After exceeds the longest wait")
)

// Options are the non-config dependencies of a Retrier. The zero value
// works.
type Options struct {
	// Name labels metrics; default obs.DefaultName ("default"). One per
	// upstream, never a per-request value.
	Name string
	// Budget, shared by the calls to one upstream; default none.
	Budget *Budget
	// Retryable decides whether an outcome is worth retrying; default
	// Retryable.
	Retryable func(outcome.Outcome) bool
	// Clock measures the deadline and waits; default clock.Real.
	Clock clock.Clock
	// Rand returns uniform draws in [0, 1) for jitter; default
	// math/rand/v2.Float64.
	Rand func() float64
	// Registerer receives the metrics; default prometheus.DefaultRegisterer.
	Registerer prometheus.Registerer
}

// Retrier applies a Config. Safe for concurrent use.
type Retrier struct {
	p         Config
	budget    *Budget
	retryable func(outcome.Outcome) bool
	clk       clock.Clock
	rand      func() float64
	retries   prometheus.Counter
	stops     map[error]prometheus.Counter
}

// New returns a Retrier applying cfg. An invalid cfg is an error naming the
// field (a *config.FieldError); a zero field takes its default.
func New(cfg Config, opts Options) (*Retrier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Retrier{p: cfg.withDefaults(), budget: opts.Budget, retryable: opts.Retryable, clk: clock.Or(opts.Clock), rand: opts.Rand}
	if r.retryable == nil {
		r.retryable = Retryable
	}
	if r.rand == nil {
		r.rand = rand.Float64
	}
	name := obs.NameOr(opts.Name)
	r.retries = obs.Register(opts.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "veer_retry_retries_total",
		Help: "Retries scheduled.",
	}, []string{"retrier"})).WithLabelValues(name)
	stops := obs.Register(opts.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "veer_retry_giveups_total",
		Help: "Calls that stopped retrying after a failed attempt, by reason.",
	}, []string{"retrier", "reason"}))
	r.stops = map[error]prometheus.Counter{}
	for err, label := range map[error]string{ErrAttempts: "attempts", ErrDeadline: "deadline", ErrBudget: "budget", ErrUnsafe: "unsafe", ErrNotRetryable: "not_retryable", ErrRetryAfter: "retry_after"} {
		r.stops[err] = stops.WithLabelValues(name, label)
	}
	return r, nil
}

// Call is one logical request across its attempts. Not safe for concurrent
// use.
type Call struct {
	r          *Retrier
	idempotent bool
	start      time.Time
	attempts   int
}

// Start begins a logical request at the clock's current time. idempotent
// says whether the request may be resent after reaching the upstream (see
// Idempotent).
func (r *Retrier) Start(idempotent bool) *Call {
	return r.StartAt(r.clk.Now(), idempotent)
}

// StartAt is Start at an explicit time.
func (r *Retrier) StartAt(now time.Time, idempotent bool) *Call {
	if r.budget != nil {
		r.budget.RequestAt(now)
	}
	return &Call{r: r, idempotent: idempotent, start: now}
}

// Attempts returns the number of attempts reported to Next so far.
func (c *Call) Attempts() int { return c.attempts }

// Next reports the outcome of the attempt just made. It returns the wait
// before the next attempt, or the reason to stop (nil wait). On success it
// returns 0 and nil: the call is done.
func (c *Call) Next(o outcome.Outcome) (time.Duration, error) {
	return c.NextAt(c.r.clk.Now(), o)
}

// NextAt is Next at an explicit time.
func (c *Call) NextAt(now time.Time, o outcome.Outcome) (time.Duration, error) {
	c.attempts++
	if o.OK() {
		return 0, nil
	}
	r := c.r
	p := r.p
	var err error
	var wait time.Duration
	switch {
	case !r.retryable(o):
		err = ErrNotRetryable
	case !Safe(c.idempotent, o):
		err = ErrUnsafe
	case p.MaxAttempts > 0 && c.attempts >= p.MaxAttempts:
		err = ErrAttempts
	default:
		wait = p.Backoff(c.attempts, r.rand())
		if o.RetryAfter > wait {
			wait = o.RetryAfter
		}
		switch {
		case wait > p.MaxWait:
			err = ErrRetryAfter
		case p.Deadline > 0 && now.Add(wait).Sub(c.start) > p.Deadline:
			err = ErrDeadline
		case r.budget != nil && !r.budget.TryRetryAt(now):
			err = ErrBudget
		}
	}
	if err != nil {
		r.stops[err].Inc()
		return 0, err
	}
	r.retries.Inc()
	return wait, nil
}

// Do calls fn until it succeeds or the policy stops it, waiting between
// attempts on the Retrier's clock. It returns the last outcome and nil on
// success, the stop reason otherwise, or ctx's error if ctx ends during a
// wait.
func (r *Retrier) Do(ctx context.Context, idempotent bool, fn func(ctx context.Context) outcome.Outcome) (outcome.Outcome, error) {
	c := r.Start(idempotent)
	for {
		o := fn(ctx)
		wait, err := c.Next(o)
		if err != nil || o.OK() {
			return o, err
		}
		if err := Sleep(ctx, r.clk, wait); err != nil {
			return o, err
		}
	}
}

// Sleep waits d on clk, returning early with ctx's error.
func Sleep(ctx context.Context, clk clock.Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := clock.Or(clk).NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}
