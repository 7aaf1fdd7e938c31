package failover

import (
	"cmp"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/outcome"
)

// Defaults of the zero-valued Config fields.
const (
	// DefaultCanaryPath is the path a veer gateway answers itself for its
	// clients (outcome.HealthPath): "this gateway has a healthy upstream for
	// this host", whatever the backends serve.
	DefaultCanaryPath          = outcome.HealthPath
	DefaultFailureThreshold    = 3
	DefaultFailureWindow       = 10 * time.Second
	DefaultFailureTimeout      = 30 * time.Second
	DefaultRecoveryTimeout     = 10 * time.Second
	DefaultRecoveryTimeoutStep = 10 * time.Second
	DefaultRecoveryTimeoutMax  = 5 * time.Minute
	DefaultRecoveryDecay       = time.Hour
	DefaultCanaryTimeout       = 3 * time.Second
	DefaultCanaryRetryInterval = 5 * time.Second
	DefaultCanaryRetryMax      = 30 * time.Second
	DefaultHistoryTTL          = time.Hour
	DefaultHistorySize         = 16
)

// The policy names accepted in Config.Policy.
const (
	PolicyVeer       = "veer"
	PolicyUber       = "uber"
	PolicyRoundRobin = "round_robin"
	PolicyThreshold  = "threshold"
)

// maxThreshold bounds FailureThreshold: the Uber policy keeps the times of
// the last FailureThreshold failures.
const maxThreshold = 1000

// maxHistorySize bounds HistorySize.
const maxHistorySize = 1024

// Config configures the failover policies and the Transport. The zero value
// of every field except Primary and Backups takes the documented default.
// Durations are written as Go durations ("10s") in YAML and JSON.
type Config struct {
	// Primary is the preferred domain, "host" or "host:port". Required.
	Primary string `yaml:"primary" json:"primary"`
	// Backups are the backup domains in the order canaries probe them.
	// At least one is required; none may equal Primary or repeat.
	Backups []string `yaml:"backups" json:"backups"`
	// Policy picks the decision core: "veer" (default: the Uber machine
	// with ConfirmPrimary and the per-network history, see
	// docs/failover.md), "uber" (the seed's machine exactly, ConfirmPrimary
	// and DeviceOfflineCheck as set), or one of the baselines "round_robin"
	// and "threshold".
	Policy string `yaml:"policy" json:"policy"`

	// CanaryPath is the health endpoint canaries request. Default
	// DefaultCanaryPath (outcome.HealthPath, which veer gateway answers
	// itself). A canary answered 401, 403 or 404 is logged (once a domain)
	// and counted in veer_failover_canary_misconfigured_total: such a path
	// makes every canary fail, so failover can never succeed.
	CanaryPath string `yaml:"canary_path" json:"canary_path"`
	// CanaryScheme forces the canaries' scheme ("http" or "https"). Default
	// "": the scheme of the most recent regular request, https before any.
	CanaryScheme string `yaml:"canary_scheme" json:"canary_scheme"`
	// CanaryTimeout bounds one canary request. Default 3s.
	CanaryTimeout time.Duration `yaml:"canary_timeout" json:"canary_timeout"`
	// CanaryRetryInterval is the pause after the first round of canaries
	// through the backup list that failed as a whole (FAILOVER, without
	// DeviceOfflineCheck). Each further failed round doubles the pause, up
	// to CanaryRetryMax; any state change resets it. Default 5s.
	CanaryRetryInterval time.Duration `yaml:"canary_retry_interval" json:"canary_retry_interval"`
	// CanaryRetryMax caps the doubled pause between failed canary rounds.
	// It also bounds how much later than the seed's fixed interval a
	// failover can start when the device comes back online during a real
	// primary outage. Set it equal to CanaryRetryInterval for a fixed
	// interval (the behaviour before backoff). Default 30s (at least
	// CanaryRetryInterval).
	CanaryRetryMax time.Duration `yaml:"canary_retry_max" json:"canary_retry_max"`

	// FailureThreshold is X: consecutive network failures within
	// FailureWindow that start FAILOVER. For the threshold baseline it is
	// the number of consecutive failures that switch domains. Default 3,
	// at most 1000.
	FailureThreshold int `yaml:"failure_threshold" json:"failure_threshold"`
	// FailureWindow is Y. Default 10s.
	FailureWindow time.Duration `yaml:"failure_window" json:"failure_window"`
	// FailureTimeout is T: a failure streak not broken by a success for
	// this long starts FAILOVER even with fewer than X failures (low
	// traffic). Default 30s.
	FailureTimeout time.Duration `yaml:"failure_timeout" json:"failure_timeout"`

	// RecoveryTimeout is the delay before the first RECOVERY probe after
	// entering BACKUP. Default 10s.
	RecoveryTimeout time.Duration `yaml:"recovery_timeout" json:"recovery_timeout"`
	// RecoveryTimeoutStep is added to the recovery delay on each further
	// entry into BACKUP (linear growth). Default 10s.
	RecoveryTimeoutStep time.Duration `yaml:"recovery_timeout_step" json:"recovery_timeout_step"`
	// RecoveryTimeoutMax caps the recovery delay. Default 5m.
	RecoveryTimeoutMax time.Duration `yaml:"recovery_timeout_max" json:"recovery_timeout_max"`
	// RecoveryDecay: each full RecoveryDecay of traffic on primary (since
	// it last came back to primary) removes one step of growth, so that a
	// flap last week does not slow recovery today. Default 1h.
	RecoveryDecay time.Duration `yaml:"recovery_decay" json:"recovery_decay"`

	// DeviceOfflineCheck: when every backup canary of a FAILOVER round
	// failed, also probe the primary; if that fails too the device is
	// offline and the policy stays on primary (FAILOVER -> PRIMARY, reason
	// device_offline) instead of probing on. Default false.
	DeviceOfflineCheck bool `yaml:"device_offline_check" json:"device_offline_check"`
	// ConfirmPrimary (beyond the seed): in FAILOVER, when a backup's canary
	// succeeds, the policy canaries the primary before committing to
	// BACKUP. If the primary answers, the failures were the user's own
	// network (a loss burst, the end of a tunnel) and the machine returns
	// to PRIMARY (reason primary_confirmed); if not, it enters BACKUP on
	// that backup as the seed does. It costs one extra canary (bounded by
	// CanaryTimeout) per would-be entry into BACKUP and none otherwise.
	// Default false for the "uber" policy (the seed's exact behaviour);
	// the default "veer" policy always confirms (see docs/failover.md for
	// the measured trade-off).
	ConfirmPrimary bool `yaml:"confirm_primary" json:"confirm_primary"`

	// FailureStatuses lists HTTP statuses that count as failures of the
	// domain, as network errors do (opt-in; e.g. [502, 504] for an edge
	// that answers for a dead origin). Risk: a 5xx storm of the whole
	// backend then moves every client to the backups, where it may meet
	// the same backend. Default empty: only network errors count. Codes
	// 400 to 599.
	FailureStatuses []int `yaml:"failure_statuses" json:"failure_statuses"`

	// HistoryTTL is how long the "veer" policy remembers that the primary
	// failed on a network (the seed's "prediction from history"): a launch
	// or a network change onto that network within it starts FAILOVER at
	// once. Default 1h.
	HistoryTTL time.Duration `yaml:"history_ttl" json:"history_ttl"`
	// HistorySize bounds the networks remembered (the least recent is
	// forgotten first). Default 16, at most 1024.
	HistorySize int `yaml:"history_size" json:"history_size"`

	// Store persists the backup domain across restarts. Default nil: in
	// memory only.
	Store Store `yaml:"-" json:"-"`
	// Clock drives the Transport's timers. Default clock.Real.
	Clock clock.Clock `yaml:"-" json:"-"`
	// Logger receives transitions and store warnings. Default
	// slog.Default().
	Logger *slog.Logger `yaml:"-" json:"-"`
	// Registerer receives the metrics. Default
	// prometheus.DefaultRegisterer.
	Registerer prometheus.Registerer `yaml:"-" json:"-"`
	// OnTransition, if set, is called for each state change, in order,
	// with the Transport's lock held: it must return quickly and must not
	// call RoundTrip, NetworkChanged or Close (Domain and State are safe
	// and already show the new state).
	OnTransition func(Event) `yaml:"-" json:"-"`
	// OnCanary, if set, is called after each canary with its domain and
	// outcome, under the same rules as OnTransition.
	OnCanary func(domain string, o Canary) `yaml:"-" json:"-"`
}

// Event is a state change of a Transport, with domain names.
type Event struct {
	At         time.Time
	From, To   State
	Reason     Reason
	FromDomain string // the domain regular traffic used before
	Domain     string // the domain regular traffic uses after
}

// Canary is the result of one canary request as passed to OnCanary.
type Canary struct {
	At   time.Time
	OK   bool
	Kind outcome.Kind
	// Status is the HTTP status of the canary's answer, 0 when none came.
	Status int
	// Misconfigured: the answer was 401, 403 or 404, so the canary path is
	// not a health endpoint this domain serves (see Config.CanaryPath).
	Misconfigured bool
}

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	c.Policy = cmp.Or(c.Policy, PolicyVeer)
	c.HistoryTTL = cmp.Or(c.HistoryTTL, DefaultHistoryTTL)
	c.HistorySize = cmp.Or(c.HistorySize, DefaultHistorySize)
	c.CanaryPath = cmp.Or(c.CanaryPath, DefaultCanaryPath)
	c.CanaryTimeout = cmp.Or(c.CanaryTimeout, DefaultCanaryTimeout)
	c.CanaryRetryInterval = cmp.Or(c.CanaryRetryInterval, DefaultCanaryRetryInterval)
	c.CanaryRetryMax = cmp.Or(c.CanaryRetryMax, max(DefaultCanaryRetryMax, c.CanaryRetryInterval))
	c.FailureThreshold = cmp.Or(c.FailureThreshold, DefaultFailureThreshold)
	c.FailureWindow = cmp.Or(c.FailureWindow, DefaultFailureWindow)
	c.FailureTimeout = cmp.Or(c.FailureTimeout, DefaultFailureTimeout)
	c.RecoveryTimeout = cmp.Or(c.RecoveryTimeout, DefaultRecoveryTimeout)
	c.RecoveryTimeoutStep = cmp.Or(c.RecoveryTimeoutStep, DefaultRecoveryTimeoutStep)
	c.RecoveryTimeoutMax = cmp.Or(c.RecoveryTimeoutMax, max(DefaultRecoveryTimeoutMax, c.RecoveryTimeout))
	c.RecoveryDecay = cmp.Or(c.RecoveryDecay, DefaultRecoveryDecay)
	return c
}

// Validate checks c (zero fields count as their defaults) and returns
// *config.FieldError values naming each bad field (joined with errors.Join),
// or nil. Match them with errors.As.
func (c Config) Validate() error {
	var errs []error
	add := func(e *config.FieldError) { errs = append(errs, e) }
	if c.Primary == "" {
		add(config.Field("primary", "a primary domain is required"))
	} else if err := checkHost(c.Primary); err != nil {
		add(config.Field("primary", "%v", err))
	}
	if len(c.Backups) == 0 {
		add(config.Field("backups", "at least one backup domain is required"))
	}
	for i, b := range c.Backups {
		path := func() string { return "backups[" + strconv.Itoa(i) + "]" }
		if err := checkHost(b); err != nil {
			add(config.Field(path(), "%v", err))
			continue
		}
		if strings.EqualFold(b, c.Primary) {
			add(config.Field(path(), "%q equals the primary domain", b))
		}
		for j := range i {
			if strings.EqualFold(b, c.Backups[j]) {
				add(config.Field(path(), "%q repeats backups[%d]", b, j))
				break
			}
		}
	}
	switch c.Policy {
	case "", PolicyVeer, PolicyUber, PolicyRoundRobin, PolicyThreshold:
	default:
		add(config.Field("policy", "unknown policy %q: want %s, %s, %s or %s", c.Policy, PolicyVeer, PolicyUber, PolicyRoundRobin, PolicyThreshold))
	}
	for i, s := range c.FailureStatuses {
		if s < 400 || s > 599 {
			add(config.Field("failure_statuses["+strconv.Itoa(i)+"]", "%d: want an HTTP status from 400 to 599", s))
		}
	}
	if c.HistorySize < 0 || c.HistorySize > maxHistorySize {
		add(config.Field("history_size", "%d: want 0 (default %d) up to %d", c.HistorySize, DefaultHistorySize, maxHistorySize))
	}
	if c.CanaryPath != "" && !strings.HasPrefix(c.CanaryPath, "/") {
		add(config.Field("canary_path", "%q must start with /", c.CanaryPath))
	}
	switch c.CanaryScheme {
	case "", "http", "https":
	default:
		add(config.Field("canary_scheme", "%q: want http or https", c.CanaryScheme))
	}
	if c.FailureThreshold < 0 || c.FailureThreshold > maxThreshold {
		add(config.Field("failure_threshold", "%d: want 0 (default %d) up to %d", c.FailureThreshold, DefaultFailureThreshold, maxThreshold))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"canary_timeout", c.CanaryTimeout},
		{"canary_retry_interval", c.CanaryRetryInterval},
		{"canary_retry_max", c.CanaryRetryMax},
		{"failure_window", c.FailureWindow},
		{"failure_timeout", c.FailureTimeout},
		{"recovery_timeout", c.RecoveryTimeout},
		{"recovery_timeout_step", c.RecoveryTimeoutStep},
		{"recovery_timeout_max", c.RecoveryTimeoutMax},
		{"recovery_decay", c.RecoveryDecay},
		{"history_ttl", c.HistoryTTL},
	} {
		if d.v < 0 {
			add(config.Field(d.name, "%v is negative", d.v))
		}
	}
	if d := c.withDefaults(); c.RecoveryTimeoutMax > 0 && d.RecoveryTimeoutMax < d.RecoveryTimeout {
		add(config.Field("recovery_timeout_max", "%v is below recovery_timeout %v", d.RecoveryTimeoutMax, d.RecoveryTimeout))
	}
	if d := c.withDefaults(); c.CanaryRetryMax > 0 && d.CanaryRetryMax < d.CanaryRetryInterval {
		add(config.Field("canary_retry_max", "%v is below canary_retry_interval %v", d.CanaryRetryMax, d.CanaryRetryInterval))
	}
	return errors.Join(errs...)
}

// checkHost accepts "host" or "host:port" (IPv6 literals in brackets).
func checkHost(h string) error {
	if strings.ContainsAny(h, "/?#@ \t") {
		return errors.New("want host or host:port, without scheme, path or spaces")
	}
	host := h
	if strings.Contains(h, ":") {
		var port string
		var err error
		host, port, err = net.SplitHostPort(h)
		if err != nil {
			return errors.New("want host or host:port")
		}
		if n, err := strconv.Atoi(port); err != nil || !allDigits(port) || n < 1 || n > 65535 {
			return errors.New("port must be a number from 1 to 65535")
		}
	}
	if host == "" {
		return errors.New("empty host")
	}
	return nil
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
