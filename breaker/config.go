package breaker

import (
	"cmp"
	"errors"
	"strconv"
	"time"

	"github.com/veerhq/veer/config"
)

// Level is one step of multi-level breaking: when the failure ratio in the
// window reaches FailureRatio, only the Admit share of requests is let
// through. A level with Admit 0 opens the circuit.
type Level struct {
	// FailureRatio in (0, 1] at which the level starts.
	FailureRatio float64 `yaml:"failure_ratio" json:"failure_ratio"`
	// Admit is the share of requests let through, in [0, 1).
	Admit float64 `yaml:"admit" json:"admit"`
}

// The defaults of a zero Config field.
const (
	DefaultWindow         = 10 * time.Second
	DefaultBuckets        = 10
	DefaultMinRequests    = 20
	DefaultOpenFor        = 5 * time.Second
	DefaultMaxProbes      = 1
	DefaultProbeSuccesses = 3
	// MaxBuckets bounds Config.Buckets and ThrottleConfig.Buckets.
	MaxBuckets = 1000
	// MaxLevels bounds Config.Levels.
	MaxLevels = 16
)

// DefaultLevels are the levels used when Config.Levels is empty:
// ≥ 50 % failures admit half, ≥ 80 % admit a tenth, ≥ 95 % open.
var DefaultLevels = []Level{{0.5, 0.5}, {0.8, 0.1}, {0.95, 0}}

// Config tunes a Breaker: what a config file can say. The zero value works;
// a zero field takes its default, a negative or out-of-range one is an error
// of New naming the field.
type Config struct {
	// Window is the span over which outcomes are counted; default
	// DefaultWindow (10s).
	Window time.Duration `yaml:"window" json:"window"`
	// Buckets divides the window, at most MaxBuckets; default
	// DefaultBuckets (10).
	Buckets int `yaml:"buckets" json:"buckets"`
	// MinRequests is the number of outcomes in the window below which the
	// breaker stays closed whatever the ratio; default DefaultMinRequests
	// (20).
	MinRequests int `yaml:"min_requests" json:"min_requests"`
	// Levels, in increasing FailureRatio with non-increasing Admit, at most
	// MaxLevels; default DefaultLevels.
	Levels []Level `yaml:"levels" json:"levels"`
	// OpenFor is how long an open circuit rejects everything before it
	// turns half-open; also how long a half-open probe may stay without an
	// answer. Default DefaultOpenFor (5s).
	OpenFor time.Duration `yaml:"open_for" json:"open_for"`
	// MaxProbes caps the half-open probes in flight at once; default
	// DefaultMaxProbes (1).
	MaxProbes int `yaml:"max_probes" json:"max_probes"`
	// ProbeSuccesses is the number of successful probes that close the
	// circuit; default DefaultProbeSuccesses (3).
	ProbeSuccesses int `yaml:"probe_successes" json:"probe_successes"`
}

// Validate reports invalid fields.
func (c *Config) Validate() error {
	var errs []error
	if c.Buckets < 0 || c.Buckets > MaxBuckets {
		errs = append(errs, config.Field("buckets", "must be in [0, %d]", MaxBuckets))
	}
	errs = append(errs,
		config.NotNegative("window", c.Window),
		config.NotNegative("min_requests", c.MinRequests),
		config.NotNegative("open_for", c.OpenFor),
		config.NotNegative("max_probes", c.MaxProbes),
		config.NotNegative("probe_successes", c.ProbeSuccesses),
	)
	if len(c.Levels) > MaxLevels {
		errs = append(errs, config.Field("levels", "at most %d levels", MaxLevels))
	}
	for i, l := range c.Levels {
		f := func(sub string) string { return "levels[" + strconv.Itoa(i) + "]." + sub }
		if !(l.FailureRatio > 0 && l.FailureRatio <= 1) {
			errs = append(errs, config.Field(f("failure_ratio"), "must be in (0, 1], got %v", l.FailureRatio))
		}
		if !(l.Admit >= 0 && l.Admit < 1) {
			errs = append(errs, config.Field(f("admit"), "must be in [0, 1), got %v", l.Admit))
		}
		if i > 0 {
			p := c.Levels[i-1]
			if l.FailureRatio <= p.FailureRatio {
				errs = append(errs, config.Field(f("failure_ratio"), "must be greater than the previous level's"))
			}
			if l.Admit > p.Admit {
				errs = append(errs, config.Field(f("admit"), "must not exceed the previous level's"))
			}
		}
	}
	return errors.Join(errs...)
}

// withDefaults fills the zero fields of a valid Config with their defaults.
func (c Config) withDefaults() Config {
	c.Window = cmp.Or(c.Window, DefaultWindow)
	c.Buckets = cmp.Or(c.Buckets, DefaultBuckets)
	c.MinRequests = cmp.Or(c.MinRequests, DefaultMinRequests)
	if len(c.Levels) == 0 {
		c.Levels = DefaultLevels
	}
	c.OpenFor = cmp.Or(c.OpenFor, DefaultOpenFor)
	c.MaxProbes = cmp.Or(c.MaxProbes, DefaultMaxProbes)
	c.ProbeSuccesses = cmp.Or(c.ProbeSuccesses, DefaultProbeSuccesses)
	return c
}

// The defaults of a zero ThrottleConfig field.
const (
	DefaultThrottleK       = 2
	DefaultThrottleWindow  = 2 * time.Minute
	DefaultThrottleBuckets = 24
)

// withDefaults fills the zero fields of a valid ThrottleConfig.
func (c ThrottleConfig) withDefaults() ThrottleConfig {
	c.K = cmp.Or(c.K, DefaultThrottleK)
	c.Window = cmp.Or(c.Window, DefaultThrottleWindow)
	c.Buckets = cmp.Or(c.Buckets, DefaultThrottleBuckets)
	return c
}
