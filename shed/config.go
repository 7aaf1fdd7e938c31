package shed

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/tier"
)

// Defaults of Config.
const (
	DefaultTarget       = 5 * time.Millisecond
	DefaultInterval     = 100 * time.Millisecond
	DefaultMaxQueue     = 1000
	DefaultMaxEndpoints = 256
	DefaultTier         = tier.SheddablePlus
	DefaultRetryAfter   = time.Second
)

// StormRejectHold is the default hold of an HTTP/1.x refusal in a storm
// (Config.RejectHold): a closed-loop client comes back about ten times a
// second per connection.
const StormRejectHold = 100 * time.Millisecond

// Config configures a Shedder. The zero value works: every route is its own
// endpoint with an adaptive limit, a 5 ms target over 100 ms intervals; the
// tier comes from the Veer-Criticality header, trusted from every caller;
// requests without one are sheddable_plus; critical and critical_plus are
// never shed.
//
// The fields with yaml tags can be loaded from a file (Load) and reloaded
// (Apply, e.g. through config/watch); the others are wiring set in code.
type Config struct {
	// Target is the CoDel target queue wait; default 5ms.
	Target time.Duration `yaml:"target" json:"target"`
	// Interval is the CoDel measurement interval; default 100ms.
	Interval time.Duration `yaml:"interval" json:"interval"`
	// MaxQueue bounds the requests waiting per endpoint; default 1000. When
	// full, a new request evicts the oldest waiter of a lower, sheddable
	// tier, or is rejected.
	MaxQueue int `yaml:"max_queue" json:"max_queue"`
	// MaxEndpoints bounds the number of endpoints tracked; requests to
	// further endpoints share one stage named "other". Default 256.
	MaxEndpoints int `yaml:"max_endpoints" json:"max_endpoints"`
	// DefaultTier is the tier of a request that states none and whose
	// caller is not in the table; default sheddable_plus.
	DefaultTier tier.Tier `yaml:"default_tier" json:"default_tier"`
	// NeverShed is the lowest tier that is never shed; default critical (so
	// critical and critical_plus are never shed). Set critical_plus to let
	// critical be shed after the sheddable tiers.
	NeverShed tier.Tier `yaml:"never_shed" json:"never_shed"`
	// TrustedCallers, when not empty, restricts who may set the
	// Veer-Criticality header (by Rpc-Caller); others get their table or
	// default tier. Default: everyone is trusted.
	TrustedCallers []string `yaml:"trusted_callers" json:"trusted_callers"`
	// Limit is the concurrency limit of every endpoint; adaptive by default.
	Limit LimitConfig `yaml:"limit" json:"limit"`
	// RetryAfter is sent with rejections; default 1s.
	RetryAfter time.Duration `yaml:"retry_after" json:"retry_after"`
	// RejectHold is how long, at most, an HTTP refusal is held before it is
	// written while its endpoint refuses more requests than it admits (a
	// rejection storm: closed-loop clients that ignore Retry-After retry
	// at once, and the refusals take the processor; see pace.go). Held
	// refusals wait between 7/8 of RejectHold and all of it. Default 0:
	// StormRejectHold (100ms) for Middleware's HTTP/1.x refusals once the
	// storm refuses 12 times what it admits (a closed-loop storm; an
	// open-loop 2× or 6× overload is not held), except on connections
	// that have carried a request of a never-shed tier (a
	// pool shared with critical traffic keeps a connection that answers at
	// once); HTTP/2 refusals and Hold (gRPC) are not held. A positive value
	// holds HTTP/2 refusals and Hold's too; a negative one turns holding
	// off. What the default costs: a bounded connection pool shared by the
	// storm and critical traffic, none of whose connections has carried a
	// critical request yet, makes its first critical request wait for a
	// held refusal (pace.go, docs/shed.md).
	RejectHold time.Duration `yaml:"reject_hold" json:"reject_hold"`
	// Endpoints holds per-endpoint settings: limit overrides and the
	// caller → tier table.
	Endpoints []EndpointConfig `yaml:"endpoints" json:"endpoints"`

	// Clock drives the stages; default clock.Real.
	Clock clock.Clock `yaml:"-" json:"-"`
	// Logger receives admin changes and reloads; default slog.Default().
	Logger *slog.Logger `yaml:"-" json:"-"`
	// Registerer receives the metrics; default prometheus.DefaultRegisterer.
	Registerer prometheus.Registerer `yaml:"-" json:"-"`
	// Endpoint names the endpoint of an HTTP request; default: the route
	// pattern of the wrapped *http.ServeMux (or r.Pattern), else the path.
	Endpoint func(*http.Request) string `yaml:"-" json:"-"`
	// IOBound says that the handlers behind this Shedder wait on the
	// network, as a proxy's do: an admitted request then starts at once,
	// without the run-queue yield and start turn that bring the requests
	// waiting in the Go scheduler's run queue into the stage in front of a
	// CPU-bound handler (shed/internal/runq). Such a handler gives up its
	// processor at its first network wait, which lets the runtime poll the
	// network as the yield would, so the yield would only add its own cost.
	// The run-queue probe still tells the limiter when the processors are
	// saturated; the adaptive limit, the CoDel queue, tiers and pacing are
	// unchanged. Default false (the yield runs; see docs/shed.md).
	IOBound bool `yaml:"-" json:"-"`
}

// EndpointConfig is the configuration of one endpoint.
type EndpointConfig struct {
	// Name is the endpoint: an http.ServeMux pattern ("GET /trips/{id}")
	// or a gRPC full method ("/pkg.Service/Method"). Required.
	Name string `yaml:"name" json:"name"`
	// Limit overrides Config.Limit for this endpoint when any field is set.
	Limit *LimitConfig `yaml:"limit" json:"limit"`
	// DefaultTier overrides Config.DefaultTier for this endpoint.
	DefaultTier tier.Tier `yaml:"default_tier" json:"default_tier"`
	// Callers maps a caller (Rpc-Caller) to its tier on this endpoint.
	Callers map[string]tier.Tier `yaml:"callers" json:"callers"`
}

// Validate reports invalid fields. It is pure.
func (c *Config) Validate() error {
	var errs []error
	add := func(e error) {
		if e != nil {
			errs = append(errs, e)
		}
	}
	if c.Target < 0 {
		add(config.Field("target", "must not be negative"))
	}
	if c.Interval < 0 {
		add(config.Field("interval", "must not be negative"))
	}
	if c.Target > 0 && c.Interval > 0 && c.Interval < c.Target {
		add(config.Field("interval", "must be at least target (%s)", c.Target))
	}
	if c.MaxQueue < 0 {
		add(config.Field("max_queue", "must not be negative"))
	}
	if c.MaxEndpoints < 0 {
		add(config.Field("max_endpoints", "must not be negative"))
	}
	if c.RetryAfter < 0 {
		add(config.Field("retry_after", "must not be negative"))
	}
	if c.NeverShed == tier.Sheddable {
		add(config.Field("never_shed", "sheddable would make every tier unsheddable"))
	}
	for i, tc := range c.TrustedCallers {
		if tc == "" || len(tc) > tier.MaxCallerLen {
			add(config.In("trusted_callers", config.Field("["+itoa(i)+"]", "caller must be 1..%d bytes", tier.MaxCallerLen)))
		}
	}
	add(config.In("limit", c.Limit.validate()))
	seen := map[string]bool{}
	for i, e := range c.Endpoints {
		p := "endpoints[" + itoa(i) + "]"
		if e.Name == "" {
			add(config.Field(p+".name", "required"))
		} else if seen[e.Name] {
			add(config.Field(p+".name", "duplicate endpoint %q", e.Name))
		}
		seen[e.Name] = true
		if e.Limit != nil {
			add(config.In(p+".limit", e.Limit.validate()))
		}
		for caller := range e.Callers {
			if caller == "" || len(caller) > tier.MaxCallerLen {
				add(config.Field(p+".callers", "caller %q must be 1..%d bytes", caller, tier.MaxCallerLen))
			}
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return joinErrs(errs)
}

func (c LimitConfig) validate() error {
	var errs []error
	for _, f := range []struct {
		name string
		v    int
	}{{"static", c.Static}, {"initial", c.Initial}, {"min", c.Min}, {"max", c.Max}, {"min_samples", c.MinSamples}} {
		if f.v < 0 {
			errs = append(errs, config.Field(f.name, "must not be negative"))
		}
	}
	if c.Min > 0 && c.Max > 0 && c.Max < c.Min {
		errs = append(errs, config.Field("max", "must be at least min (%d)", c.Min))
	}
	if c.Tolerance != 0 && c.Tolerance <= 1 {
		errs = append(errs, config.Field("tolerance", "must be > 1"))
	}
	return joinErrs(errs)
}

// Load reads a YAML or JSON config file strictly and validates it.
func Load(path string) (*Config, error) {
	c := new(Config)
	if err := config.Load(path, c); err != nil {
		return nil, err
	}
	return c, nil
}

// ParseConfig parses YAML or JSON config bytes strictly and validates them;
// name is used in error messages.
func ParseConfig(data []byte, name string) (*Config, error) {
	c := new(Config)
	if err := config.Parse(data, name, c); err != nil {
		return nil, err
	}
	return c, nil
}
