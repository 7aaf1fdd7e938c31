package breaker

import (
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/internal/rolling"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/outcome"
)

// ErrThrottled is returned by Throttle.Allow when the request is rejected
// locally.
var ErrThrottled = errors.New("breaker: throttled by client-side adaptive throttling")

// ThrottleConfig tunes a Throttle: what a config file can say. The zero
// value works; a zero field takes its default, an invalid one is an error of
// NewThrottle naming the field.
type ThrottleConfig struct {
	// K is the multiplier of accepts: the client sends up to K times what
	// the dependency accepts before rejecting locally. Default
	// DefaultThrottleK (2). Must be in [1, 1000] when set.
	K float64 `yaml:"k" json:"k"`
	// Window is the span over which requests and accepts are counted;
	// default DefaultThrottleWindow (2m, the SRE book's choice).
	Window time.Duration `yaml:"window" json:"window"`
	// Buckets divides the window, at most MaxBuckets; default
	// DefaultThrottleBuckets (24).
	Buckets int `yaml:"buckets" json:"buckets"`
}

// Validate reports invalid fields.
func (c *ThrottleConfig) Validate() error {
	var errs []error
	if c.K != 0 && !(c.K >= 1 && c.K <= 1000) {
		errs = append(errs, config.Field("k", "must be in [1, 1000], got %v", c.K))
	}
	errs = append(errs, config.NotNegative("window", c.Window))
	if c.Buckets < 0 || c.Buckets > MaxBuckets {
		errs = append(errs, config.Field("buckets", "must be in [0, %d]", MaxBuckets))
	}
	return errors.Join(errs...)
}

// ThrottleOptions are the non-config dependencies of a Throttle.
type ThrottleOptions struct {
	// Name labels metrics; default obs.DefaultName ("default").
	Name string
	// Clock drives Allow; default clock.Real.
	Clock clock.Clock
	// Classify decides which outcomes are rejections by the dependency
	// (Failure); default DefaultClassify. Success and Ignore count as
	// accepts.
	Classify func(outcome.Outcome) Verdict
	// Rand returns uniform values in [0, 1); default math/rand/v2.Float64.
	// Tests inject a fixed sequence.
	Rand func() float64
	// Registerer receives the metrics; default prometheus.DefaultRegisterer.
	Registerer prometheus.Registerer
}

// Throttle is Google SRE client-side adaptive throttling.
type Throttle struct {
	k        float64
	clk      clock.Clock
	classify func(outcome.Outcome) Verdict
	rand     func() float64
	base     time.Time
	done     func(outcome.Outcome)
	rejected prometheus.Counter

	mu  sync.Mutex
	win rolling.Window // A = requests, B = accepts
}

// NewThrottle returns a Throttle. An invalid cfg is an error naming the
// field (a *config.FieldError); a zero field takes its default.
func NewThrottle(cfg ThrottleConfig, opts ThrottleOptions) (*Throttle, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	t := &Throttle{
		k:        cfg.K,
		clk:      clock.Or(opts.Clock),
		classify: opts.Classify,
		rand:     opts.Rand,
		win:      rolling.New(cfg.Window, cfg.Buckets),
	}
	if t.classify == nil {
		t.classify = DefaultClassify
	}
	if t.rand == nil {
		t.rand = rand.Float64
	}
	name := obs.NameOr(opts.Name)
	t.rejected = obs.Register(opts.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "veer_breaker_throttled_total",
		Help: "Requests rejected locally by client-side adaptive throttling.",
	}, []string{"breaker"})).WithLabelValues(name)
	t.base = t.clk.Now()
	t.done = func(o outcome.Outcome) { t.doneNs(int64(t.clk.Since(t.base)), o) }
	return t, nil
}

// Allow counts a request and decides whether to send it. On success the
// caller must call done once with the outcome.
func (t *Throttle) Allow() (done func(outcome.Outcome), err error) {
	if err := t.allowNs(int64(t.clk.Since(t.base))); err != nil {
		return nil, err
	}
	return t.done, nil
}

// AllowAt is the pure form of Allow (the random draw aside).
func (t *Throttle) AllowAt(now time.Time) error { return t.allowNs(int64(now.Sub(t.base))) }

func (t *Throttle) allowNs(now int64) error {
	u := t.rand()
	t.mu.Lock()
	t.win.Advance(now)
	p := t.probLocked()
	t.win.Add(1, 0)
	t.mu.Unlock()
	if u < p {
		t.rejected.Inc()
		return ErrThrottled
	}
	return nil
}

// DoneAt reports the outcome of an admitted request.
func (t *Throttle) DoneAt(now time.Time, o outcome.Outcome) { t.doneNs(int64(now.Sub(t.base)), o) }

func (t *Throttle) doneNs(now int64, o outcome.Outcome) {
	if t.classify(o) == Failure {
		return
	}
	t.mu.Lock()
	t.win.Advance(now)
	t.win.Add(0, 1)
	t.mu.Unlock()
}

// RejectProbability is the probability with which a request at now would
// be rejected: max(0, (requests − K·accepts) / (requests + 1)).
func (t *Throttle) RejectProbability(now time.Time) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.win.Advance(int64(now.Sub(t.base)))
	return t.probLocked()
}

func (t *Throttle) probLocked() float64 {
	sum := t.win.Sum()
	req, acc := float64(sum.A), float64(sum.B)
	p := (req - t.k*acc) / (req + 1)
	if p < 0 {
		return 0
	}
	return p
}
