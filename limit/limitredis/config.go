package limitredis

import (
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/limit"
)

// The defaults of Config's zero fields.
const (
	DefaultInstances     = 1
	DefaultPrefix        = "veer:limit:"
	DefaultTimeout       = 100 * time.Millisecond
	DefaultLeaseTTL      = 30 * time.Second
	DefaultProbeInterval = 500 * time.Millisecond
)

// Config of a shared limiter. The zero value of every field but Limits
// works.
type Config struct {
	// Limits shared by all instances (the whole fleet's limits).
	Limits limit.Config `yaml:"limits" json:"limits"`
	// Instances sharing the limits; the local fallback enforces
	// Limits ÷ Instances. Default 1.
	Instances int `yaml:"instances" json:"instances"`
	// Prefix of the Redis keys; default "veer:limit:".
	Prefix string `yaml:"prefix" json:"prefix"`
	// Timeout of one Redis decision, from the call to Admit (time spent
	// waiting for a batch included); default 100ms.
	Timeout time.Duration `yaml:"timeout" json:"timeout"`
	// LeaseTTL: a concurrency slot of a crashed instance comes back after
	// this long; default 30s.
	LeaseTTL time.Duration `yaml:"lease_ttl" json:"lease_ttl"`
	// ProbeInterval: how often Redis is probed while in fallback; default
	// 500ms.
	ProbeInterval time.Duration `yaml:"probe_interval" json:"probe_interval"`
}

// Validate reports invalid fields.
func (c *Config) Validate() error {
	var errs []error
	errs = append(errs, config.In("limits", c.Limits.Validate()))
	if c.Instances < 0 || c.Instances > 100000 {
		errs = append(errs, config.Field("instances", "must be in [0, 100000]"))
	}
	if c.Timeout < 0 {
		errs = append(errs, config.Field("timeout", "must not be negative"))
	}
	if c.LeaseTTL < 0 || (c.LeaseTTL > 0 && c.LeaseTTL < 30*time.Millisecond) {
		errs = append(errs, config.Field("lease_ttl", "must be at least 30ms"))
	}
	if c.ProbeInterval < 0 {
		errs = append(errs, config.Field("probe_interval", "must not be negative"))
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	if c.Instances <= 0 {
		c.Instances = DefaultInstances
	}
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.ProbeInterval <= 0 {
		c.ProbeInterval = DefaultProbeInterval
	}
	if c.Limits.ConcurrencyRetryAfter <= 0 {
		c.Limits.ConcurrencyRetryAfter = time.Second
	}
	return c
}

// Options are the run-time wiring of a Limiter.
type Options struct {
	// Clock drives the probe and lease renewal; default clock.Real.
	Clock clock.Clock
	// Registerer receives the metrics; default prometheus.DefaultRegisterer.
	Registerer prometheus.Registerer
	// Logger receives fallback and recovery; default slog.Default().
	Logger *slog.Logger
	// OnFallback, if set, is called with true on each switch to local
	// limits and with false on each return to Redis. It must not block.
	OnFallback func(fallback bool)
}
