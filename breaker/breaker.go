package breaker

import (
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/internal/rolling"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/outcome"
)

// State is the circuit's state.
type State uint8

// The states. Degraded is a closed circuit admitting only part of the
// traffic because a Level with Admit > 0 is in force.
const (
	Closed State = iota
	Degraded
	Open
	HalfOpen
)

var stateNames = [...]string{"closed", "degraded", "open", "half_open"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

// Verdict is how an outcome counts.
type Verdict uint8

// The verdicts.
const (
	Success Verdict = iota
	Failure
	// Ignore: the outcome says nothing about the dependency (the caller
	// canceled) and is not counted.
	Ignore
)

// DefaultClassify counts network failures, timeouts and 5xx (ServerError,
// Overloaded) as failures, a caller's cancellation as nothing, and
// everything else (success, 4xx, 429) as success of the dependency.
func DefaultClassify(o outcome.Outcome) Verdict {
	switch {
	case o.Kind == outcome.ClientCanceled:
		return Ignore
	case o.Kind.Network(), o.Kind == outcome.ServerError, o.Kind == outcome.Overloaded:
		return Failure
	}
	return Success
}

// Errors returned by Allow. Match them with errors.Is.
var (
	// ErrOpen: the circuit is open, or half-open with every probe slot
	// taken.
	ErrOpen = errors.New("breaker: circuit open")
	// ErrDegraded: the circuit admits only part of the traffic and this
	// request was not admitted.
	ErrDegraded = errors.New("breaker: rejected by partial admission")
)

// Options are the non-config dependencies of a Breaker. The zero value works.
type Options struct {
	// Name labels metrics and logs; default obs.DefaultName ("default").
	// Use a small, fixed set of names (one per dependency), never a
	// per-request value.
	Name string
	// Clock drives Allow; default clock.Real.
	Clock clock.Clock
	// Classify decides which outcomes are failures; default DefaultClassify.
	Classify func(outcome.Outcome) Verdict
	// Registerer receives the metrics; default prometheus.DefaultRegisterer.
	Registerer prometheus.Registerer
	// Logger receives transitions; default slog.Default().
	Logger *slog.Logger
}

// Ticket identifies one admission for DoneAt.
type Ticket struct {
	gen   uint64
	probe bool
}

// Status is a snapshot of a Breaker.
type Status struct {
	State State
	// Level is the index in Config.Levels in force, -1 when none.
	Level int
	// Admit is the share of requests admitted now (1 closed, 0 open; in
	// half-open the probes are capped by count, not share, and Admit is 0).
	Admit float64
	// Requests and Failures counted in the window.
	Requests, Failures int64
	// Generation counts transitions between closed, open and half-open.
	Generation uint64
}

// Breaker is a multi-level circuit breaker. See the package comment.
type Breaker struct {
	cfg      Config
	clk      clock.Clock
	classify func(outcome.Outcome) Verdict
	log      *slog.Logger
	name     string
	base     time.Time
	m        metrics

	mu       sync.Mutex
	state    State
	level    int
	credit   int64 // partial admission credit, in millionths of a request
	gen      uint64
	win      rolling.Window // A = successes, B = failures
	until    int64          // open: end of open period; half-open: probe deadline
	inflight int            // half-open probes in flight
	probeOK  int
	fns      [2]func(outcome.Outcome) // done functions of the current generation: [regular, probe]
}

// New returns a closed Breaker. An invalid cfg is an error naming the field
// (a *config.FieldError); a zero field takes its default.
func New(cfg Config, opts Options) (*Breaker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	b := &Breaker{
		cfg:      cfg,
		clk:      clock.Or(opts.Clock),
		classify: opts.Classify,
		log:      obs.LoggerOr(opts.Logger),
		name:     obs.NameOr(opts.Name),
		level:    -1,
		win:      rolling.New(cfg.Window, cfg.Buckets),
	}
	if b.classify == nil {
		b.classify = DefaultClassify
	}
	b.base = b.clk.Now()
	b.m = newMetrics(opts.Registerer, b.name)
	b.m.state.Set(float64(Closed))
	b.makeFns()
	return b, nil
}

func (b *Breaker) makeFns() {
	for i := range b.fns {
		t := Ticket{gen: b.gen, probe: i == 1}
		b.fns[i] = func(o outcome.Outcome) { b.done(int64(b.clk.Since(b.base)), t, o) }
	}
}

// Allow asks to send one request now. On success the caller must call done
// exactly once with the request's outcome. done is safe to call from any
// goroutine; calling it again counts the outcome again.
func (b *Breaker) Allow() (done func(outcome.Outcome), err error) {
	// Since reads only the monotonic clock: half the cost of Now.
	now := int64(b.clk.Since(b.base))
	b.mu.Lock()
	t, err := b.allowLocked(now)
	if err != nil {
		b.mu.Unlock()
		return nil, err
	}
	fn := b.fns[0]
	if t.probe {
		fn = b.fns[1]
	}
	b.mu.Unlock()
	return fn, nil
}

// AllowAt is the pure form of Allow: it decides at now and returns a ticket
// for DoneAt.
func (b *Breaker) AllowAt(now time.Time) (Ticket, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.allowLocked(b.ns(now))
}

// DoneAt reports the outcome of the request admitted with t. Outcomes of an
// older generation are dropped.
func (b *Breaker) DoneAt(now time.Time, t Ticket, o outcome.Outcome) {
	b.done(b.ns(now), t, o)
}

func (b *Breaker) done(n int64, t Ticket, o outcome.Outcome) {
	v := b.classify(o)
	b.mu.Lock()
	defer b.mu.Unlock()
	if t.gen != b.gen {
		b.m.stale.Inc()
		return
	}
	if t.probe {
		b.inflight--
		switch v {
		case Failure:
			b.transition(Open, n)
		case Success:
			b.probeOK++
			if b.probeOK >= b.cfg.ProbeSuccesses {
				b.transition(Closed, n)
			}
		}
		return
	}
	if v == Ignore {
		return
	}
	b.win.Advance(n)
	if v == Failure {
		b.win.Add(0, 1)
	} else {
		b.win.Add(1, 0)
	}
	b.evaluate(n)
}

// RetryAfter is how long an open circuit stays open from now (0 when it is
// not open): the Retry-After to give callers rejected with ErrOpen.
func (b *Breaker) RetryAfter() time.Duration {
	n := int64(b.clk.Since(b.base))
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state != Open || b.until <= n {
		return 0
	}
	return time.Duration(b.until - n)
}

// Status returns a snapshot.
func (b *Breaker) Status() Status {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := Status{State: b.state, Level: b.level, Requests: b.win.Sum().A + b.win.Sum().B, Failures: b.win.Sum().B, Generation: b.gen}
	switch b.state {
	case Closed:
		s.Admit = 1
	case Degraded:
		s.Admit = b.cfg.Levels[b.level].Admit
	}
	return s
}

func (b *Breaker) ns(t time.Time) int64 { return int64(t.Sub(b.base)) }

func (b *Breaker) allowLocked(now int64) (Ticket, error) {
	switch b.state {
	case Open:
		if now < b.until {
			b.m.rejOpen.Inc()
			return Ticket{}, ErrOpen
		}
		b.transition(HalfOpen, now)
		return b.probeLocked(now)
	case HalfOpen:
		return b.probeLocked(now)
	}
	if b.win.Advance(now) {
		b.evaluate(now)
		if b.state == Open {
			b.m.rejOpen.Inc()
			return Ticket{}, ErrOpen
		}
	}
	if b.state == Degraded {
		b.credit += int64(b.cfg.Levels[b.level].Admit*1e6 + 0.5)
		if b.credit < 1e6 {
			b.m.rejDegraded.Inc()
			return Ticket{}, ErrDegraded
		}
		b.credit -= 1e6
	}
	return Ticket{gen: b.gen}, nil
}

func (b *Breaker) probeLocked(now int64) (Ticket, error) {
	if b.inflight > 0 && now >= b.until {
		// Probes lost without an answer: start over with fresh slots.
		b.transition(HalfOpen, now)
	}
	if b.inflight >= b.cfg.MaxProbes {
		b.m.rejProbe.Inc()
		return Ticket{}, ErrOpen
	}
	b.inflight++
	return Ticket{gen: b.gen, probe: true}, nil
}

// evaluate picks the level for the window's counts, opening the circuit
// when the level admits nothing.
func (b *Breaker) evaluate(now int64) {
	sum := b.win.Sum()
	ok, fail := sum.A, sum.B
	level := -1
	if total := ok + fail; total >= int64(b.cfg.MinRequests) && total > 0 {
		r := float64(fail) / float64(total)
		for i, l := range b.cfg.Levels {
			if r >= l.FailureRatio-1e-12 {
				level = i
			}
		}
	}
	if level == b.level {
		return
	}
	if level >= 0 && b.cfg.Levels[level].Admit == 0 {
		b.level = level
		b.transition(Open, now)
		return
	}
	from := b.state
	b.level = level
	b.credit = 0
	b.state = Closed
	if level >= 0 {
		b.state = Degraded
	}
	b.m.state.Set(float64(b.state))
	if from != b.state {
		b.m.transitions[b.state].Inc()
	}
	b.log.Info("breaker level", "breaker", b.name, "state", b.state.String(), "level", level, "requests", ok+fail, "failures", fail)
}

// transition moves to Open, HalfOpen or Closed, starting a new generation.
func (b *Breaker) transition(to State, now int64) {
	from := b.state
	b.state = to
	b.gen++
	b.inflight = 0
	b.probeOK = 0
	b.credit = 0
	switch to {
	case Open:
		b.until = now + int64(b.cfg.OpenFor)
		b.win.Reset()
	case HalfOpen:
		b.until = now + int64(b.cfg.OpenFor)
	case Closed:
		b.level = -1
		b.win.Reset()
	}
	b.makeFns()
	b.m.state.Set(float64(to))
	b.m.transitions[to].Inc()
	b.log.Info("breaker transition", "breaker", b.name, "from", from.String(), "to", to.String(), "generation", b.gen)
}
