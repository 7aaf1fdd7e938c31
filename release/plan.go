package release

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/veerhq/veer/config"
)

// Defaults of a Plan's zero fields.
var (
	// DefaultRings are the shares of the other tenants that move to the new
	// version, one step each, after the canary tenants.
	DefaultRings = []float64{1, 10, 50, 100}
)

const (
	// DefaultHold bounds one step: a step whose analysis has not decided
	// within it is promoted when its counts are within the SLO, else
	// aborted (see Judge). Enough traffic decides long before.
	DefaultHold = 5 * time.Minute
	// DefaultDrainTimeout bounds the drain that begins a rollout: B's
	// cluster takes no new requests until every gateway reports it idle
	// (its requests in flight finished) or this long has passed.
	DefaultDrainTimeout = 30 * time.Second
	// DefaultMinSamples is the number of the new version's requests a step
	// needs before it may be promoted.
	DefaultMinSamples = 200
	// DefaultMaxErrorRate is the error rate a new version may have above
	// the old one's before it counts as bad (1 percentage point: Flagger's
	// conventional 99 % success threshold, judged against A rather than
	// absolutely).
	DefaultMaxErrorRate = 0.01
	// DefaultSlowThreshold is the latency over which a request counts as
	// slow, for both versions.
	DefaultSlowThreshold = 500 * time.Millisecond
	// DefaultMaxSlowRate is the share of slow requests a new version may
	// have above the old one's (2 percentage points).
	DefaultMaxSlowRate = 0.02
	// DefaultMaxTailRate is the share of requests over twice A's observed
	// p99 that B may have above A's share (2 percentage points).
	DefaultMaxTailRate = 0.02
	// DefaultAlpha is the chance that one test of one step rolls back a
	// healthy version (the sequential test's false-alarm rate): two tests
	// (errors, slow requests) a step over five steps keep a whole
	// rollout's false rollbacks near 1 %. DefaultBeta is the chance of
	// promoting a bad step.
	DefaultAlpha = 0.001
	DefaultBeta  = 0.01
)

// Plan is a release document (store key KeyPrefix+route): it moves a
// route's traffic from cluster From (version A) to cluster To (version B)
// in steps. Step 0 sends the canary tenants; each later step a ring of the
// other tenants by a stable hash of the tenant key; the last ring is 100 %.
// BlueGreen is the one-step plan: everyone at once, and back at once.
type Plan struct {
	// Route is the gateway route released (required).
	Route string `json:"route" yaml:"route"`
	// From is the cluster serving the route now (version A; required).
	From string `json:"from" yaml:"from"`
	// To is the cluster with the new version (B; required, not From).
	To string `json:"to" yaml:"to"`
	// CanaryTenants go to B first (step 0); empty: no canary step.
	CanaryTenants []string `json:"canary_tenants,omitempty" yaml:"canary_tenants,omitempty"`
	// Rings are the percentages of the other tenants on B, one step each,
	// strictly increasing, the last 100; default DefaultRings.
	Rings []float64 `json:"rings,omitempty" yaml:"rings,omitempty"`
	// BlueGreen: one step, every tenant on B; Rings and CanaryTenants must
	// be empty.
	BlueGreen bool `json:"blue_green,omitempty" yaml:"blue_green,omitempty"`
	// Hold bounds each step; default DefaultHold.
	Hold time.Duration `json:"hold,omitempty" yaml:"hold,omitempty"`
	// NoDrain skips the drain that begins a rollout by default: B's
	// cluster drained on every gateway (no new requests, on any route)
	// until every gateway reports it idle, so that its instances can be
	// upgraded with nothing in flight; then the first step.
	NoDrain bool `json:"no_drain,omitempty" yaml:"no_drain,omitempty"`
	// DrainTimeout bounds the drain: past it the first step begins even
	// if a gateway still has requests in flight on B (they finish where
	// they are) or never reported; default DefaultDrainTimeout.
	DrainTimeout time.Duration `json:"drain_timeout,omitempty" yaml:"drain_timeout,omitempty"`
	// SLO the new version is judged by.
	SLO SLO `json:"slo,omitempty" yaml:"slo,omitempty"`
}

// SLO is what the analysis holds the new version to, beside the old one.
type SLO struct {
	// MaxErrorRate is how much higher B's error rate (5xx, 429 and
	// network failures; other 4xx are the caller's) may be than A's;
	// default DefaultMaxErrorRate.
	MaxErrorRate float64 `json:"max_error_rate,omitempty" yaml:"max_error_rate,omitempty"`
	// SlowThreshold is the latency over which a request is slow; default
	// DefaultSlowThreshold.
	SlowThreshold time.Duration `json:"slow_threshold,omitempty" yaml:"slow_threshold,omitempty"`
	// MaxSlowRate is how much higher B's share of slow requests may be
	// than A's; default DefaultMaxSlowRate.
	MaxSlowRate float64 `json:"max_slow_rate,omitempty" yaml:"max_slow_rate,omitempty"`
	// MaxTailRate is how much higher B's share of requests over
	// TailFactor × A's observed p99 may be than A's (the tail test: a B
	// slow in its tail only); default DefaultMaxTailRate.
	MaxTailRate float64 `json:"max_tail_rate,omitempty" yaml:"max_tail_rate,omitempty"`
	// MinSamples of B a step needs before it is promoted; default
	// DefaultMinSamples.
	MinSamples int `json:"min_samples,omitempty" yaml:"min_samples,omitempty"`
	// Alpha and Beta are the sequential test's error rates (false rollback,
	// missed bad version); defaults DefaultAlpha and DefaultBeta.
	Alpha float64 `json:"alpha,omitempty" yaml:"alpha,omitempty"`
	Beta  float64 `json:"beta,omitempty" yaml:"beta,omitempty"`
}

// Validate names the bad field.
func (p *Plan) Validate() error {
	var errs []error
	add := func(field, format string, args ...any) { errs = append(errs, config.Field(field, format, args...)) }
	if p.Route == "" {
		add("route", "required")
	}
	if p.From == "" {
		add("from", "required: the cluster serving the route now")
	}
	if p.To == "" {
		add("to", "required: the cluster with the new version")
	} else if p.To == p.From {
		add("to", "%q: the same cluster as from", p.To)
	}
	if p.BlueGreen && (len(p.Rings) > 0 || len(p.CanaryTenants) > 0) {
		add("blue_green", "a blue-green release is one step: leave rings and canary_tenants empty")
	}
	for i, r := range p.Rings {
		switch {
		case r <= 0 || r > 100:
			add(fmt.Sprintf("rings[%d]", i), "%v: want a percentage in (0, 100]", r)
		case i > 0 && r <= p.Rings[i-1]:
			add(fmt.Sprintf("rings[%d]", i), "%v: percentages must increase (previous %v)", r, p.Rings[i-1])
		}
	}
	if n := len(p.Rings); n > 0 && p.Rings[n-1] != 100 {
		add(fmt.Sprintf("rings[%d]", n-1), "%v: the last ring must be 100", p.Rings[n-1])
	}
	for i, t := range p.CanaryTenants {
		if t == "" || slices.Index(p.CanaryTenants, t) != i {
			add(fmt.Sprintf("canary_tenants[%d]", i), "%q: empty or repeated", t)
		}
	}
	if p.Hold < 0 {
		add("hold", "must not be negative")
	}
	if p.DrainTimeout < 0 {
		add("drain_timeout", "must not be negative")
	} else if p.DrainTimeout > 0 && p.NoDrain {
		add("drain_timeout", "%v: set, but no_drain skips the drain", p.DrainTimeout)
	}
	s := p.SLO
	for _, f := range []struct {
		name string
		v    float64
	}{{"slo.max_error_rate", s.MaxErrorRate}, {"slo.max_slow_rate", s.MaxSlowRate}, {"slo.max_tail_rate", s.MaxTailRate}} {
		if f.v < 0 || f.v >= 1 {
			add(f.name, "%v: want a share in [0, 1)", f.v)
		}
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"slo.alpha", s.Alpha}, {"slo.beta", s.Beta}} {
		if f.v < 0 || f.v >= 0.5 {
			add(f.name, "%v: want a probability in [0, 0.5)", f.v)
		}
	}
	if s.SlowThreshold < 0 {
		add("slo.slow_threshold", "must not be negative")
	}
	if s.MinSamples < 0 {
		add("slo.min_samples", "must not be negative")
	}
	return errors.Join(errs...)
}

// withDefaults fills the zero fields.
func (p Plan) withDefaults() Plan {
	if len(p.Rings) == 0 && !p.BlueGreen {
		p.Rings = DefaultRings
	}
	if p.BlueGreen {
		p.Rings = []float64{100}
	}
	p.Hold = cmp.Or(p.Hold, DefaultHold)
	p.DrainTimeout = cmp.Or(p.DrainTimeout, DefaultDrainTimeout)
	p.SLO.MaxErrorRate = cmp.Or(p.SLO.MaxErrorRate, DefaultMaxErrorRate)
	p.SLO.SlowThreshold = cmp.Or(p.SLO.SlowThreshold, DefaultSlowThreshold)
	p.SLO.MaxSlowRate = cmp.Or(p.SLO.MaxSlowRate, DefaultMaxSlowRate)
	p.SLO.MaxTailRate = cmp.Or(p.SLO.MaxTailRate, DefaultMaxTailRate)
	p.SLO.MinSamples = cmp.Or(p.SLO.MinSamples, DefaultMinSamples)
	p.SLO.Alpha = cmp.Or(p.SLO.Alpha, DefaultAlpha)
	p.SLO.Beta = cmp.Or(p.SLO.Beta, DefaultBeta)
	return p
}

// Steps is the number of steps of the plan: the canary step (when there
// are canary tenants) and one a ring.
func (p Plan) Steps() int {
	p = p.withDefaults()
	n := len(p.Rings)
	if len(p.CanaryTenants) > 0 {
		n++
	}
	return n
}
