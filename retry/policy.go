package retry

import (
	"cmp"
	"errors"
	"math"
	"net/http"
	"time"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/outcome"
)

// The defaults of a zero Config field.
const (
	DefaultMaxAttempts = 3
	DefaultInitial     = 100 * time.Millisecond
	DefaultMultiplier  = 2
	DefaultMaxWait     = 10 * time.Second
	// MaxMaxAttempts bounds Config.MaxAttempts.
	MaxMaxAttempts = 1000
)

// Config is the retry policy, what a config file can say: how often and how
// long to retry. The zero value works: 3 attempts, full-jitter backoff from
// 100ms doubling to at most 10s per wait, no total deadline. A zero field
// takes its default; an invalid one is an error of New naming the field.
type Config struct {
	// MaxAttempts counts the first attempt too, at most MaxMaxAttempts;
	// default DefaultMaxAttempts (3). -1 means no limit, which requires a
	// Deadline.
	MaxAttempts int `yaml:"max_attempts" json:"max_attempts"`
	// Initial is the backoff base before the first retry; default
	// DefaultInitial (100ms).
	Initial time.Duration `yaml:"initial" json:"initial"`
	// Multiplier grows the base after each retry, in [1, 100] when set;
	// default DefaultMultiplier (2).
	Multiplier float64 `yaml:"multiplier" json:"multiplier"`
	// MaxWait caps every wait, including one asked for by Retry-After (a
	// longer Retry-After stops the retries with ErrRetryAfter); default
	// DefaultMaxWait (10s).
	MaxWait time.Duration `yaml:"max_wait" json:"max_wait"`
	// Deadline bounds the time from the first attempt's start to the last
	// attempt's start; default 0, no deadline.
	Deadline time.Duration `yaml:"deadline" json:"deadline"`
	// NoJitter waits exactly the base; by default each wait is drawn
	// uniformly from [0, base) ("full jitter").
	NoJitter bool `yaml:"no_jitter" json:"no_jitter"`
}

// Async is the seed's schedule for asynchronous invocations: 2, 4, 8 … s,
// capped at 20 min between tries, 6 h in all (26 retries; see the package
// comment for the arithmetic).
func Async() Config {
	return Config{MaxAttempts: -1, Initial: 2 * time.Second, Multiplier: 2, MaxWait: 20 * time.Minute, Deadline: 6 * time.Hour, NoJitter: true}
}

// Validate reports invalid fields.
func (p *Config) Validate() error {
	var errs []error
	if p.MaxAttempts < -1 || p.MaxAttempts > MaxMaxAttempts {
		errs = append(errs, config.Field("max_attempts", "must be -1 (no limit), 0 (default) or in [1, %d]", MaxMaxAttempts))
	}
	if p.MaxAttempts == -1 && p.Deadline <= 0 {
		errs = append(errs, config.Field("max_attempts", "-1 (no limit) needs a deadline"))
	}
	if p.Multiplier != 0 && !(p.Multiplier >= 1 && p.Multiplier <= 100) {
		errs = append(errs, config.Field("multiplier", "must be in [1, 100], got %v", p.Multiplier))
	}
	errs = append(errs,
		config.NotNegative("initial", p.Initial),
		config.NotNegative("max_wait", p.MaxWait),
		config.NotNegative("deadline", p.Deadline),
	)
	return errors.Join(errs...)
}

// withDefaults fills the zero fields of p with their defaults. Base,
// Backoff and Schedule call it too, so a Config value answers the same with
// or without a Retrier.
func (p Config) withDefaults() Config {
	p.MaxAttempts = cmp.Or(p.MaxAttempts, DefaultMaxAttempts)
	p.Initial = cmp.Or(max(p.Initial, 0), DefaultInitial) // Base may see an unvalidated Config
	p.Multiplier = cmp.Or(p.Multiplier, DefaultMultiplier)
	p.MaxWait = cmp.Or(max(p.MaxWait, 0), DefaultMaxWait)
	return p
}

// Base is the backoff base before retry number n (1 for the first retry):
// Initial·Multiplier^(n−1), capped at MaxWait.
func (p Config) Base(n int) time.Duration {
	p = p.withDefaults()
	if n < 1 {
		n = 1
	}
	b := float64(p.Initial) * math.Pow(p.Multiplier, float64(n-1))
	if b >= float64(p.MaxWait) || math.IsInf(b, 0) || math.IsNaN(b) {
		return p.MaxWait
	}
	return time.Duration(b)
}

// Backoff is the wait before retry n given a uniform draw u in [0, 1):
// u·Base(n) with full jitter, Base(n) without.
func (p Config) Backoff(n int, u float64) time.Duration {
	b := p.Base(n)
	if p.NoJitter {
		return b
	}
	return time.Duration(u * float64(b))
}

// Schedule lists the waits of a request whose every attempt fails at once
// and takes no time, without jitter: the longest schedule the policy allows.
func (p Config) Schedule() []time.Duration {
	q := p.withDefaults()
	var out []time.Duration
	var elapsed time.Duration
	for n := 1; q.MaxAttempts < 0 || n < q.MaxAttempts; n++ {
		w := q.Base(n)
		if q.Deadline > 0 && elapsed+w > q.Deadline {
			break
		}
		elapsed += w
		out = append(out, w)
		if n > 100000 {
			break
		}
	}
	return out
}

// Retryable reports whether an outcome is worth retrying at all, whatever
// the method: network failures, 503 (Overloaded), 429 (Limited), and 502 /
// 504 from a proxy. A 500, a 4xx and the caller's own cancellation are not.
func Retryable(o outcome.Outcome) bool {
	switch o.Kind {
	case outcome.Overloaded, outcome.Limited:
		return true
	case outcome.ServerError:
		return o.Status == http.StatusBadGateway || o.Status == http.StatusGatewayTimeout
	}
	return o.Kind.Network()
}

// IdempotencyKeyHeader is the header (IETF draft
// httpapi-idempotency-key-header) that makes a non-idempotent request safe
// to resend.
const IdempotencyKeyHeader = "Idempotency-Key"

// Idempotent reports whether method is idempotent (RFC 9110 section 9.2.2)
// or h carries an Idempotency-Key.
func Idempotent(method string, h http.Header) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return h.Get(IdempotencyKeyHeader) != ""
}

// Safe is the retry safety rule: a request may be sent again if it never
// reached the upstream (o.NotSent(): a kind such as a refused connection,
// or a transport that reported nothing written), or if it is idempotent.
func Safe(idempotent bool, o outcome.Outcome) bool {
	return idempotent || o.NotSent()
}
