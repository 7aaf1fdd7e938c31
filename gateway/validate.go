package gateway

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/veerhq/veer/config"
)

// Validate checks every field and names the first bad ones.
func (c *Config) Validate() error {
	var errs []error
	add := func(path, f string, a ...any) { errs = append(errs, config.Field(path, f, a...)) }
	if len(c.Clusters) == 0 {
		add("clusters", "at least one cluster is required")
	}
	if len(c.Routes) == 0 {
		add("routes", "at least one route is required")
	}
	names := map[string]bool{}
	for i, cl := range c.Clusters {
		p := fmt.Sprintf("clusters[%d]", i)
		errs = append(errs, config.In(p, cl.validate()))
		if cl.Name != "" && names[cl.Name] {
			add(p+".name", "duplicate cluster %q", cl.Name)
		}
		names[cl.Name] = true
	}
	routes := map[string]bool{}
	for i, r := range c.Routes {
		p := fmt.Sprintf("routes[%d]", i)
		errs = append(errs, config.In(p, r.validate(names)))
		if r.Name != "" && routes[r.Name] {
			add(p+".name", "duplicate route %q", r.Name)
		}
		routes[r.Name] = true
	}
	errs = append(errs, config.In("listen", c.Listen.validate()))
	errs = append(errs, config.In("retry", c.Retry.validate()))
	errs = append(errs, config.In("limits", c.Limits.validate()))
	if c.Shed.Enabled {
		sc := c.Shed.Config
		errs = append(errs, config.In("shed", sc.Validate()))
	}
	if c.Breaker.Enabled {
		bc := c.Breaker.Config
		errs = append(errs, config.In("breaker", bc.Validate()))
	}
	errs = append(errs, config.In("control_store", c.ControlStore.validate()))
	errs = append(errs, config.In("async", c.Async.validate()))
	for i, n := range c.TrustedNetworks {
		if _, err := netip.ParsePrefix(n); err != nil {
			add(fmt.Sprintf("trusted_networks[%d]", i), "not a CIDR: %v", err)
		}
	}
	if e := c.Tracing.OTLPEndpoint; e != "" {
		if _, _, err := net.SplitHostPort(e); err != nil {
			add("tracing.otlp_endpoint", "%q: want host:port", e)
		}
	}
	if c.AccessLog.Queue < 0 || c.AccessLog.Workers < 0 {
		add("access_log", "queue and workers must not be negative")
	}
	return errors.Join(errs...)
}

func (l *Listen) validate() error {
	var errs []error
	if l.Addr != "off" && l.Addr != "" {
		if _, _, err := net.SplitHostPort(l.Addr); err != nil {
			errs = append(errs, config.Field("addr", "%v", err))
		}
	}
	if l.Plain != "" {
		if _, _, err := net.SplitHostPort(l.Plain); err != nil {
			errs = append(errs, config.Field("plain", "%v", err))
		}
	}
	if (l.CertFile == "") != (l.KeyFile == "") {
		errs = append(errs, config.Field("cert_file", "cert_file and key_file go together"))
	}
	for name, d := range map[string]time.Duration{"read_header_timeout": l.ReadHeaderTimeout, "read_timeout": l.ReadTimeout, "write_timeout": l.WriteTimeout, "idle_timeout": l.IdleTimeout, "shutdown_timeout": l.ShutdownTimeout} {
		if d < 0 {
			errs = append(errs, config.Field(name, "must not be negative"))
		}
	}
	if l.MaxHeaderBytes < 0 {
		errs = append(errs, config.Field("max_header_bytes", "must not be negative"))
	}
	return errors.Join(errs...)
}

func (c *Cluster) validate() error {
	var errs []error
	add := func(path, f string, a ...any) { errs = append(errs, config.Field(path, f, a...)) }
	if c.Name == "" {
		add("name", "required")
	}
	switch c.Protocol {
	case "", "http1", "h2c", "h2":
	default:
		add("protocol", "%q: want http1, h2c or h2", c.Protocol)
	}
	if len(c.Backends) == 0 {
		add("backends", "at least one backend is required")
	}
	seen := map[string]bool{}
	for i, b := range c.Backends {
		p := fmt.Sprintf("backends[%d]", i)
		if _, port, err := net.SplitHostPort(b.Address); err != nil || port == "" {
			add(p+".address", "%q: want host:port", b.Address)
		}
		if seen[b.Address] {
			add(p+".address", "duplicate backend %q", b.Address)
		}
		seen[b.Address] = true
		if b.Weight < 0 {
			add(p+".weight", "must not be negative")
		}
	}
	if c.MaxIdlePerBackend < 0 || c.MaxConnsPerBackend < 0 {
		add("max_idle_per_backend", "must not be negative")
	}
	if c.Health.Path != "" && !strings.HasPrefix(c.Health.Path, "/") {
		add("health.path", "must start with /")
	}
	if c.Health.Interval < 0 || c.Health.UnhealthyInterval < 0 || c.Health.Timeout < 0 || c.Health.Rise < 0 || c.Health.Fall < 0 {
		add("health", "must not be negative")
	}
	o := c.Outlier
	if o.ConsecutiveErrors < 0 || o.MinRequests < 0 || o.BaseEjection < 0 || o.MaxEjection < 0 {
		add("outlier", "must not be negative")
	}
	if o.FailureRatio < 0 || o.FailureRatio > 1 {
		add("outlier.failure_ratio", "must be in [0, 1]")
	}
	if o.MaxEjectedShare < 0 || o.MaxEjectedShare > 1 {
		add("outlier.max_ejected_share", "must be in [0, 1]")
	}
	if c.MinHealthyShare < 0 || c.MinHealthyShare > 1 {
		add("min_healthy_share", "must be in [0, 1]")
	}
	if c.SlowStart < 0 || c.ReturnRamp < 0 {
		add("slow_start", "must not be negative")
	}
	return errors.Join(errs...)
}

func (r *Route) validate(clusters map[string]bool) error {
	var errs []error
	add := func(path, f string, a ...any) { errs = append(errs, config.Field(path, f, a...)) }
	if r.Name == "" {
		add("name", "required")
	}
	if r.PathPrefix != "" && !strings.HasPrefix(r.PathPrefix, "/") {
		add("path_prefix", "must start with /")
	}
	if strings.ContainsAny(r.Host, "/ ") || strings.Count(r.Host, "*") > 1 || (strings.Contains(r.Host, "*") && !strings.HasPrefix(r.Host, "*.")) {
		add("host", "%q: want a host name or *.domain", r.Host)
	}
	if r.HostRewrite != "" {
		if u, err := url.Parse("http://" + r.HostRewrite); err != nil || u.Host != r.HostRewrite {
			add("host_rewrite", "%q: not a host", r.HostRewrite)
		}
	}
	switch r.Policy {
	case "", "ordered", "weighted":
	default:
		add("policy", "%q: want ordered or weighted", r.Policy)
	}
	if len(r.Clusters) == 0 {
		add("clusters", "at least one cluster is required")
	}
	if len(r.Clusters) > MaxRouteClusters {
		add("clusters", "%d clusters: at most %d per route", len(r.Clusters), MaxRouteClusters)
	}
	for i, rc := range r.Clusters {
		if !clusters[rc.Name] {
			add(fmt.Sprintf("clusters[%d].name", i), "no cluster named %q", rc.Name)
		}
		if rc.Weight < 0 {
			add(fmt.Sprintf("clusters[%d].weight", i), "must not be negative")
		}
	}
	if r.TryTimeout < 0 || r.Timeout < 0 {
		add("timeout", "must not be negative")
	}
	if r.StaleOnError != nil {
		sc := *r.StaleOnError
		errs = append(errs, config.In("stale_on_error", sc.Validate()))
	}
	if r.SLO != nil {
		errs = append(errs, config.In("slo", r.SLO.Validate(DurationBuckets)))
	}
	return errors.Join(errs...)
}

func (r *Retry) validate() error {
	var errs []error
	p := r.Policy
	errs = append(errs, config.In("policy", p.Validate()))
	if p.MaxAttempts > 3 || p.MaxAttempts < 0 {
		errs = append(errs, config.Field("policy.max_attempts", "%d: the gateway makes at most 3 attempts", p.MaxAttempts))
	}
	b := r.Budget
	errs = append(errs, config.In("budget", b.Validate()))
	if b.Ratio > MaxRetryBudgetRatio {
		errs = append(errs, config.Field("budget.ratio", "%g: at most %d (one retry per request)", b.Ratio, MaxRetryBudgetRatio))
	}
	if r.MaxReplayBody < 0 {
		errs = append(errs, config.Field("max_replay_body", "must not be negative"))
	}
	return errors.Join(errs...)
}

func (l *Limits) validate() error {
	var errs []error
	lc := l.Config
	errs = append(errs, lc.Validate())
	if len(l.Keys) != len(l.Dimensions) {
		errs = append(errs, config.Field("keys", "%d keys for %d dimensions: give one key source per dimension", len(l.Keys), len(l.Dimensions)))
	}
	for i, k := range l.Keys {
		switch {
		case k == "route", k == "client_ip", k == "host":
		case strings.HasPrefix(k, "header:") && len(k) > len("header:"):
		default:
			errs = append(errs, config.Field(fmt.Sprintf("keys[%d]", i), "%q: want route, client_ip, host or header:NAME", k))
		}
	}
	if l.Instances < 0 {
		errs = append(errs, config.Field("instances", "must not be negative"))
	}
	if l.Redis != "" {
		if _, _, err := net.SplitHostPort(l.Redis); err != nil {
			errs = append(errs, config.Field("redis", "%q: want host:port", l.Redis))
		}
	}
	return errors.Join(errs...)
}

func (s *ControlStore) validate() error {
	var errs []error
	for i, e := range s.Endpoints {
		if u, err := url.Parse(e); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, config.Field(fmt.Sprintf("endpoints[%d]", i), "%q: want an etcd client URL such as http://127.0.0.1:2379", e))
		}
	}
	if len(s.Endpoints) == 0 && (s.Prefix != "" || s.DialTimeout != 0 || s.RequestTimeout != 0) {
		errs = append(errs, config.Field("endpoints", "required when control_store has other fields"))
	}
	errs = append(errs, config.NotNegative("dial_timeout", s.DialTimeout), config.NotNegative("request_timeout", s.RequestTimeout))
	return errors.Join(errs...)
}
