package limit

import (
	"errors"
	"math"
	"strconv"
	"time"

	"github.com/veerhq/veer/config"
)

// MaxDimensions is the most dimensions one Config may have.
const MaxDimensions = 8

// Limits are the limits of one key. The zero value limits nothing.
type Limits struct {
	// Rate is the sustained rate in requests per second; 0 means no rate
	// limit.
	Rate float64 `yaml:"rate" json:"rate"`
	// Burst is how many requests may arrive at once; default max(1,
	// ceil(Rate)) (one second's worth).
	Burst int `yaml:"burst" json:"burst"`
	// Concurrency caps the requests in flight; 0 means no cap.
	Concurrency int `yaml:"concurrency" json:"concurrency"`
}

func (l Limits) validate() error {
	var errs []error
	if !(l.Rate >= 0 && l.Rate <= 1e9) || math.IsNaN(l.Rate) {
		errs = append(errs, config.Field("rate", "must be in [0, 1e9], got %v", l.Rate))
	}
	if l.Burst < 0 || l.Burst > 1e9 {
		errs = append(errs, config.Field("burst", "must be in [0, 1e9]"))
	}
	if l.Burst > 0 && l.Rate == 0 {
		errs = append(errs, config.Field("burst", "needs a rate"))
	}
	if l.Concurrency < 0 {
		errs = append(errs, config.Field("concurrency", "must not be negative"))
	}
	return errors.Join(errs...)
}

// Scale returns the limits divided among n instances (rate and concurrency
// divided by n, rounded down but never below the smallest non-zero limit):
// the local fallback of a shared limit.
func (l Limits) Scale(n int) Limits {
	if n <= 1 {
		return l
	}
	out := l
	if l.Rate > 0 {
		out.Rate = l.Rate / float64(n)
		out.Burst = l.burst() / n
		if out.Burst < 1 {
			out.Burst = 1
		}
	}
	if l.Concurrency > 0 {
		out.Concurrency = l.Concurrency / n
		if out.Concurrency < 1 {
			out.Concurrency = 1
		}
	}
	return out
}

func (l Limits) burst() int {
	if l.Burst > 0 {
		return l.Burst
	}
	b := int(math.Ceil(l.Rate))
	if b < 1 {
		b = 1
	}
	return b
}

// Dimension is one axis of flow control.
type Dimension struct {
	// Name, e.g. "tenant"; used in rejections and metric labels. Required,
	// unique.
	Name string `yaml:"name" json:"name"`
	// Default applies to keys without an override.
	Default Limits `yaml:"default" json:"default"`
	// Overrides by key.
	Overrides map[string]Limits `yaml:"overrides" json:"overrides"`
}

// Config is the flow-control configuration. The zero value limits nothing.
type Config struct {
	// Dimensions in the order in which requests give their keys.
	Dimensions []Dimension `yaml:"dimensions" json:"dimensions"`
	// MaxKeys bounds the keys kept per dimension; default 100000.
	MaxKeys int `yaml:"max_keys" json:"max_keys"`
	// IdleTimeout: a key unused this long, with a full bucket and nothing
	// in flight, may be evicted; default 1m.
	IdleTimeout time.Duration `yaml:"idle_timeout" json:"idle_timeout"`
	// ConcurrencyRetryAfter is the Retry-After given for a concurrency
	// rejection (there is no schedule to compute it from); default 1s.
	ConcurrencyRetryAfter time.Duration `yaml:"concurrency_retry_after" json:"concurrency_retry_after"`
	// MaxRequestBody in bytes, enforced by
	// BodyLimitFunc(l.MaxRequestBody, …); 0 (default) means no limit.
	MaxRequestBody int64 `yaml:"max_request_body" json:"max_request_body"`
	// MaxResponseBody in bytes, for ResponseLimit.Max (see
	// Limiter.MaxResponseBody); 0 (default) means no limit.
	MaxResponseBody int64 `yaml:"max_response_body" json:"max_response_body"`
}

// Validate reports invalid fields.
func (c *Config) Validate() error {
	var errs []error
	if len(c.Dimensions) > MaxDimensions {
		errs = append(errs, config.Field("dimensions", "at most %d dimensions", MaxDimensions))
	}
	seen := map[string]bool{}
	for i, d := range c.Dimensions {
		p := "dimensions[" + strconv.Itoa(i) + "]"
		if d.Name == "" {
			errs = append(errs, config.Field(p+".name", "required"))
		} else if seen[d.Name] {
			errs = append(errs, config.Field(p+".name", "duplicate dimension %q", d.Name))
		}
		seen[d.Name] = true
		errs = append(errs, config.In(p+".default", d.Default.validate()))
		for k, o := range d.Overrides {
			errs = append(errs, config.In(p+".overrides."+k, o.validate()))
		}
	}
	if c.MaxKeys < 0 {
		errs = append(errs, config.Field("max_keys", "must not be negative"))
	}
	if c.IdleTimeout < 0 {
		errs = append(errs, config.Field("idle_timeout", "must not be negative"))
	}
	if c.ConcurrencyRetryAfter < 0 {
		errs = append(errs, config.Field("concurrency_retry_after", "must not be negative"))
	}
	if c.MaxRequestBody < 0 {
		errs = append(errs, config.Field("max_request_body", "must not be negative"))
	}
	if c.MaxResponseBody < 0 {
		errs = append(errs, config.Field("max_response_body", "must not be negative"))
	}
	return errors.Join(errs...)
}

// Scale returns c with every limit divided among n instances (Limits.Scale).
func (c Config) Scale(n int) Config {
	out := c
	out.Dimensions = make([]Dimension, len(c.Dimensions))
	for i, d := range c.Dimensions {
		nd := Dimension{Name: d.Name, Default: d.Default.Scale(n)}
		if len(d.Overrides) > 0 {
			nd.Overrides = make(map[string]Limits, len(d.Overrides))
			for k, o := range d.Overrides {
				nd.Overrides[k] = o.Scale(n)
			}
		}
		out.Dimensions[i] = nd
	}
	return out
}

func (c Config) withDefaults() Config {
	if c.MaxKeys <= 0 {
		c.MaxKeys = 100000
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = time.Minute
	}
	if c.ConcurrencyRetryAfter <= 0 {
		c.ConcurrencyRetryAfter = time.Second
	}
	return c
}
