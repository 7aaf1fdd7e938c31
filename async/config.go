package async

import (
	"cmp"
	"errors"
	"strconv"
	"time"

	"github.com/veerhq/veer/config"
)

// Defaults of Config fields, applied by withDefaults to zero fields.
const (
	DefaultEngine            = "embedded"
	DefaultMaxBody           = 1 << 20
	DefaultIdempotencyWindow = 24 * time.Hour
	DefaultRetention         = 72 * time.Hour
	DefaultSubmitTimeout     = 5 * time.Second
	DefaultAckWait           = 30 * time.Second
	DefaultAttemptTimeout    = 60 * time.Second
	DefaultGroup             = "general"
	// RetryGroup runs every attempt after the first (added when not
	// listed, with DefaultRetryConcurrency workers).
	RetryGroup = "retry"
	// TimerGroup runs delayed submissions (Veer-Delay, Veer-Not-Before)
	// when they come due (added when not listed, DefaultTimerConcurrency).
	TimerGroup              = "timer"
	DefaultRetryConcurrency = 8
	DefaultTimerConcurrency = 8
	DefaultMaxDelay         = 24 * time.Hour
	DefaultConcurrency      = 16
	DefaultRetryAfter       = 2 * time.Second
	DefaultCallbackAttempts = 3
	DefaultPollInterval     = 100 * time.Millisecond
	DefaultMetricTenants    = 10
	// MaxMetricTenants bounds Config.MetricTenants.
	MaxMetricTenants = 100
	// MaxKeyLength bounds an Idempotency-Key.
	MaxKeyLength = 255
	// MaxTenantLength bounds a tenant name.
	MaxTenantLength = 128
)

// Config is the async section of a config file. The zero value works: an
// embedded JetStream in the data dir, one "general" group of 16 workers,
// bodies up to 1 MiB, idempotency keys remembered 24 h, the seed's retry
// schedule (retry.Async()).
type Config struct {
	// Engine: "embedded" (default: an in-process nats-server whose store
	// is Dir) or "external" (the NATS servers in URLs).
	Engine string `yaml:"engine" json:"engine"`
	// Dir is the embedded server's store directory; default: "async" in
	// the gateway's data dir.
	Dir string `yaml:"dir" json:"dir"`
	// URLs of an external NATS cluster with JetStream, required when
	// Engine is "external". Its servers must sync every write (see
	// docs/async.md).
	URLs []string `yaml:"urls" json:"urls"`
	// MaxBody: larger bodies are refused with 413 and nothing is stored;
	// default 1 MiB.
	MaxBody int64 `yaml:"max_body" json:"max_body"`
	// IdempotencyWindow: how long an Idempotency-Key maps to its first
	// invocation, per tenant; default 24h. At most Retention.
	IdempotencyWindow time.Duration `yaml:"idempotency_window" json:"idempotency_window"`
	// Retention: how long invocations and their status are kept; default
	// 72h. At least the retry schedule's 6h.
	Retention time.Duration `yaml:"retention" json:"retention"`
	// SubmitTimeout bounds the wait for the store's acknowledgement;
	// default 5s. A timeout answers 503 + Retry-After.
	SubmitTimeout time.Duration `yaml:"submit_timeout" json:"submit_timeout"`
	// AckWait: an invocation whose worker neither finishes nor reports
	// progress within this long is delivered again; default 30s.
	AckWait time.Duration `yaml:"ack_wait" json:"ack_wait"`
	// AttemptTimeout bounds one upstream attempt; default 60s.
	AttemptTimeout time.Duration `yaml:"attempt_timeout" json:"attempt_timeout"`
	// Groups: isolated consumer groups, each with its own workers. Added
	// when not listed: "general" (DefaultConcurrency workers; every tenant
	// no other group names), "retry" (DefaultRetryConcurrency; every
	// attempt after the first) and "timer" (DefaultTimerConcurrency;
	// delayed submissions). The retry and timer groups take no tenants.
	Groups []Group `yaml:"groups" json:"groups"`
	// PollInterval is the consumption interval: how often an idle group
	// looks for due invocations (a local submission wakes it at once) and
	// refreshes its list of tenants; default 100ms.
	PollInterval time.Duration `yaml:"poll_interval" json:"poll_interval"`
	// TenantRate caps the invocations a tenant starts per second in each
	// group (a token bucket of TenantBurst); default 0, no cap.
	TenantRate float64 `yaml:"tenant_rate" json:"tenant_rate"`
	// TenantBurst: the bucket's size; default 1.
	TenantBurst int `yaml:"tenant_burst" json:"tenant_burst"`
	// Batch packs the concurrent submissions that carry no
	// Idempotency-Key, of any tenants and groups, into one stored message,
	// so that they share one synced write (group commit); each is
	// acknowledged (202) only after that write, and the engine then moves
	// each to its own tenant's queue before it is consumed, so fairness is
	// as without packing. Default true (unset); false: one synced message
	// per submission. Keyed submissions are never packed.
	Batch *bool `yaml:"batch" json:"batch"`
	// MaxDelay bounds a delayed submission (Veer-Delay, Veer-Not-Before):
	// later is 400; default 24h. With the retry schedule's 6h it must fit
	// in Retention.
	MaxDelay time.Duration `yaml:"max_delay" json:"max_delay"`
	// MetricTenants: the busiest tenants (by recent submissions) that get
	// their own tenant label on veer_async_tenant_* metrics; every other
	// tenant is "other". Default 10, at most 100.
	MetricTenants int `yaml:"metric_tenants" json:"metric_tenants"`
	// CallbackAttempts: attempts to deliver the result to a submission's
	// callback URL (Veer-Callback header); default 3.
	CallbackAttempts int `yaml:"callback_attempts" json:"callback_attempts"`
}

// Group is one isolated consumer group.
type Group struct {
	// Name: a token of letters, digits, '-' and '_'. Required, unique.
	Name string `yaml:"name" json:"name"`
	// Concurrency: its workers; default 16.
	Concurrency int `yaml:"concurrency" json:"concurrency"`
	// Tenants whose invocations this group runs (dedicated tenants).
	Tenants []string `yaml:"tenants" json:"tenants"`
}

// Validate reports invalid fields.
func (c *Config) Validate() error {
	var errs []error
	switch c.Engine {
	case "", "embedded":
	case "external":
		if len(c.URLs) == 0 {
			errs = append(errs, config.Field("urls", "required when engine is external"))
		}
	default:
		errs = append(errs, config.Field("engine", "must be embedded or external, got %q", c.Engine))
	}
	errs = append(errs,
		config.NotNegative("max_body", c.MaxBody),
		config.NotNegative("idempotency_window", c.IdempotencyWindow),
		config.NotNegative("retention", c.Retention),
		config.NotNegative("submit_timeout", c.SubmitTimeout),
		config.NotNegative("ack_wait", c.AckWait),
		config.NotNegative("attempt_timeout", c.AttemptTimeout),
		config.NotNegative("callback_attempts", c.CallbackAttempts),
		config.NotNegative("poll_interval", c.PollInterval),
		config.NotNegative("tenant_rate", c.TenantRate),
		config.NotNegative("tenant_burst", c.TenantBurst),
		config.NotNegative("metric_tenants", c.MetricTenants),
		config.NotNegative("max_delay", c.MaxDelay),
	)
	if c.MetricTenants > MaxMetricTenants {
		errs = append(errs, config.Field("metric_tenants", "at most %d (a metric label must stay bounded), got %d", MaxMetricTenants, c.MetricTenants))
	}
	d := c.withDefaults()
	if d.IdempotencyWindow > d.Retention {
		errs = append(errs, config.Field("idempotency_window", "must not exceed retention (%s)", d.Retention))
	}
	if d.Retention < 6*time.Hour {
		errs = append(errs, config.Field("retention", "must cover the 6h retry schedule"))
	} else if d.MaxDelay+6*time.Hour > d.Retention {
		errs = append(errs, config.Field("max_delay", "with the 6h retry schedule must fit in retention (%s)", d.Retention))
	}
	seen := map[string]bool{}
	owner := map[string]string{}
	for i, g := range c.Groups {
		f := func(field, format string, args ...any) {
			errs = append(errs, config.In(fmtIndex("groups", i), config.Field(field, format, args...)))
		}
		if !token(g.Name) {
			f("name", "must be letters, digits, '-' or '_', got %q", g.Name)
		}
		if seen[g.Name] {
			f("name", "duplicate group %q", g.Name)
		}
		seen[g.Name] = true
		if g.Concurrency < 0 {
			f("concurrency", "must not be negative")
		}
		if (g.Name == RetryGroup || g.Name == TimerGroup) && len(g.Tenants) > 0 {
			f("tenants", "the %s group takes no dedicated tenants (it runs every tenant's %s)", g.Name, map[string]string{RetryGroup: "retries", TimerGroup: "delayed submissions"}[g.Name])
		}
		for _, t := range g.Tenants {
			if o, ok := owner[t]; ok {
				f("tenants", "tenant %q is already dedicated to group %q", t, o)
			}
			owner[t] = g.Name
		}
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	c.Engine = cmp.Or(c.Engine, DefaultEngine)
	c.MaxBody = cmp.Or(c.MaxBody, DefaultMaxBody)
	c.IdempotencyWindow = cmp.Or(c.IdempotencyWindow, DefaultIdempotencyWindow)
	c.Retention = cmp.Or(c.Retention, DefaultRetention)
	c.SubmitTimeout = cmp.Or(c.SubmitTimeout, DefaultSubmitTimeout)
	c.AckWait = cmp.Or(c.AckWait, DefaultAckWait)
	c.AttemptTimeout = cmp.Or(c.AttemptTimeout, DefaultAttemptTimeout)
	c.CallbackAttempts = cmp.Or(c.CallbackAttempts, DefaultCallbackAttempts)
	c.PollInterval = cmp.Or(c.PollInterval, DefaultPollInterval)
	c.MetricTenants = cmp.Or(c.MetricTenants, DefaultMetricTenants)
	c.MaxDelay = cmp.Or(c.MaxDelay, DefaultMaxDelay)
	groups := make([]Group, 0, len(c.Groups)+3)
	has := map[string]bool{}
	for _, g := range c.Groups {
		g.Concurrency = cmp.Or(g.Concurrency, DefaultConcurrency)
		has[g.Name] = true
		groups = append(groups, g)
	}
	for _, g := range []Group{{Name: DefaultGroup, Concurrency: DefaultConcurrency}, {Name: RetryGroup, Concurrency: DefaultRetryConcurrency}, {Name: TimerGroup, Concurrency: DefaultTimerConcurrency}} {
		if !has[g.Name] {
			groups = append(groups, g)
		}
	}
	c.Groups = groups
	return c
}

// Batched reports whether submissions are packed (Batch, default true).
func (c Config) Batched() bool { return c.Batch == nil || *c.Batch }

// WithDefaults returns c with its zero fields set to their defaults: what
// an engine adapter reads.
func (c Config) WithDefaults() Config { return c.withDefaults() }

func fmtIndex(name string, i int) string { return name + "[" + strconv.Itoa(i) + "]" }

// token reports whether s is a non-empty name of letters, digits, '-' and
// '_' (a NATS subject token and a safe consumer name).
func token(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '-' || c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}
