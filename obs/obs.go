// Package obs is veer's observability backbone: structured logging with
// log/slog, a Prometheus registry and /metrics handler, and the metric naming
// rules every package follows.
//
// Naming rules (checked by Lint): metrics are called veer_<pkg>_<what>, in
// snake_case, with the unit in the name (_seconds, _bytes, _total for
// counters, _ratio, _info); labels never carry a tenant, user, device, caller
// or address, because such values are unbounded and personal.
//
// Contract: Register is idempotent, so two components (or two instances of
// one) that register the same metric share it instead of panicking.
package obs

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewLogger returns a slog.Logger writing to w in format "json" or "text"
// (default text) at level, e.g. "debug", "info", "warn", "error".
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if level != "" {
		if err := lv.UnmarshalText([]byte(level)); err != nil {
			return nil, fmt.Errorf("obs: log level %q: %w", level, err)
		}
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "", "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("obs: log format %q: want json or text", format)
}

// Discard is a logger that drops everything; components default to
// slog.Default() and tests pass Discard to keep output clean.
var Discard = slog.New(slog.DiscardHandler)

// LoggerOr returns l, or slog.Default() when l is nil.
func LoggerOr(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.Default()
	}
	return l
}

// DefaultName is the instance name of a component given none: the value of
// the label (breaker, retrier, cache...) that tells its metrics apart from
// another instance's.
const DefaultName = "default"

// NameOr returns name, or DefaultName when name is empty.
func NameOr(name string) string {
	if name == "" {
		return DefaultName
	}
	return name
}

// NewRegistry returns a registry with the Go runtime and process collectors.
func NewRegistry() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}

// Handler serves the registry in the Prometheus text and OpenMetrics formats.
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{EnableOpenMetrics: true})
}

// Register registers c with reg and returns it; if an identical collector is
// already registered it returns that one instead. A nil reg means
// prometheus.DefaultRegisterer. It panics on a conflicting registration
// (same name, different labels or help), which is a programming error.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if reg == nil {
		reg = prometheus.DefaultRegisterer
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(fmt.Sprintf("obs: register metric: %v", err))
	}
	return c
}

var nameRE = regexp.MustCompile(`^veer_[a-z0-9]+_[a-z0-9_]+$`)

var unitSuffixes = []string{"_total", "_seconds", "_bytes", "_ratio", "_info", "_count", "_state", "_requests", "_limit", "_inflight", "_entries", "_keys", "_sessions", "_invocations", "_timestamp_seconds"}

// ForbiddenLabels are label names that would carry unbounded or personal
// values.
var ForbiddenLabels = []string{"tenant", "user", "user_id", "device", "device_id", "caller", "ip", "addr", "address", "customer", "session", "key"}

// BoundedLabels are the metrics allowed a forbidden label because its
// values are bounded by construction: async's top-N tenants plus "other"
// (at most async.MaxMetricTenants+1 values; asserted by its tests).
var BoundedLabels = map[string]string{"veer_async_tenant_submissions_total": "tenant", "veer_async_tenant_end_to_end_seconds": "tenant"}

// CheckName reports whether name follows veer's metric naming rules.
func CheckName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("metric %q: want veer_<pkg>_<what> in snake_case", name)
	}
	for _, s := range unitSuffixes {
		if strings.HasSuffix(name, s) {
			return nil
		}
	}
	return fmt.Errorf("metric %q: name must end in a unit or kind (%s)", name, strings.Join(unitSuffixes, ", "))
}

// Lint gathers g and reports every veer_ metric that breaks the naming rules
// or uses a forbidden label. Metrics not starting with veer_ (runtime,
// process) are ignored. Tests of packages with metrics call it.
func Lint(g prometheus.Gatherer) []error {
	mfs, err := g.Gather()
	if err != nil {
		return []error{err}
	}
	var errs []error
	for _, mf := range mfs {
		name := mf.GetName()
		if !strings.HasPrefix(name, "veer_") {
			continue
		}
		if err := CheckName(name); err != nil {
			errs = append(errs, err)
		}
		seen := map[string]bool{}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				ln := lp.GetName()
				if seen[ln] {
					continue
				}
				seen[ln] = true
				for _, f := range ForbiddenLabels {
					if ln == f && BoundedLabels[name] != ln {
						errs = append(errs, fmt.Errorf("metric %q: label %q would carry unbounded or personal values", name, ln))
					}
				}
			}
		}
	}
	return errs
}
