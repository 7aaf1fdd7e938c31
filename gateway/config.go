package gateway

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/veerhq/veer/breaker"
	"github.com/veerhq/veer/cache"
	"github.com/veerhq/veer/limit"
	"github.com/veerhq/veer/retry"
	"github.com/veerhq/veer/shed"
	"github.com/veerhq/veer/slo"
)

// Defaults of Config fields, applied by withDefaults to zero fields.
const (
	DefaultListen            = "127.0.0.1:8443"
	DefaultDataDir           = "veer-gateway-data"
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 60 * time.Second
	DefaultWriteTimeout      = 60 * time.Second
	DefaultIdleTimeout       = 90 * time.Second
	DefaultMaxHeaderBytes    = 64 << 10
	DefaultShutdownTimeout   = 20 * time.Second
	DefaultMaxReplayBody     = 1 << 20
	DefaultTotalTimeout      = 30 * time.Second
	DefaultHealthInterval    = 2 * time.Second
	DefaultHealthTimeout     = time.Second
	DefaultRise              = 2
	DefaultFall              = 3
	DefaultConsecutiveErrors = 5
	DefaultFailureRatio      = 0.5
	DefaultRatioMinRequests  = 20
	DefaultBaseEjection      = 30 * time.Second
	DefaultMaxEjection       = 5 * time.Minute
	DefaultMaxEjectedShare   = 1
	DefaultSlowStart         = 10 * time.Second
	DefaultMinHealthyShare   = 0.5
	DefaultReturnRamp        = time.Second
	DefaultMaxIdlePerBackend = 64
	DefaultAccessLogQueue    = 4096
	DefaultAccessLogWorkers  = 1
	// DefaultRetryBudgetRatio: retries may add half the requests (per
	// 10 s), enough for one dead cluster of three (a third of requests
	// retried once) with room; MaxRetryBudgetRatio bounds it at one retry
	// per request.
	DefaultRetryBudgetRatio = 0.5
	MaxRetryBudgetRatio     = 1
	// DefaultRetryBudgetMinPerSecond is the budget's floor: retries always
	// allowed, whatever the ratio, per second of its window (100 per the
	// default 10 s), so that a gateway that has seen few requests (just
	// started, or quiet) can still move each to another cluster (retry's
	// own default, 3 per window, cost a cluster killed right after start
	// 19 requests in veer up). Like Envoy's min_retry_concurrency: at a
	// rate this small a retry storm cannot hurt an upstream, and
	// max_attempts still bounds each request.
	DefaultRetryBudgetMinPerSecond = 10
	// DefaultShedInitialLimit is where a route's adaptive shedding limit
	// starts: a proxy waits on the network and does not burn CPU, so it
	// starts high and the limiter lowers it when latency says so (shed's
	// own default, 4, suits a CPU-bound handler).
	DefaultShedInitialLimit = 256
	// DefaultUnhealthyInterval: a backend that is down or ejected is
	// checked this often (instead of every interval), so that it returns
	// soon after it heals.
	DefaultUnhealthyInterval = 250 * time.Millisecond
)

// Config is the whole gateway configuration: one file, one immutable
// snapshot. The zero value of every field but Routes and Clusters works.
type Config struct {
	// Listen: the public listeners.
	Listen Listen `yaml:"listen" json:"listen"`
	// Admin: the operations listener (/healthz, /readyz, /metrics, /admin/).
	Admin Admin `yaml:"admin" json:"admin"`
	// DataDir keeps the self-signed certificate generated when
	// Listen.CertFile is empty; default "veer-gateway-data".
	DataDir string `yaml:"data_dir" json:"data_dir"`
	// Routes, matched by host then longest path prefix. Required.
	Routes []Route `yaml:"routes" json:"routes"`
	// Clusters named by the routes. Required.
	Clusters []Cluster `yaml:"clusters" json:"clusters"`
	// Retry: cross-cluster retries of failed attempts.
	Retry Retry `yaml:"retry" json:"retry"`
	// Limits: flow control; nothing is limited by default.
	Limits Limits `yaml:"limits" json:"limits"`
	// Shed: criticality shedding per route (the route name is the shed
	// endpoint); off unless Enabled.
	Shed Shed `yaml:"shed" json:"shed"`
	// Breaker: one multi-level breaker per cluster; off unless Enabled.
	Breaker Breaker `yaml:"breaker" json:"breaker"`
	// TrustedNetworks: clients whose Veer-Criticality and Rpc-Caller
	// headers are believed and forwarded upstream (CIDRs). Others have them
	// removed. Default: none trusted.
	TrustedNetworks []string `yaml:"trusted_networks" json:"trusted_networks"`
	// AccessLog: the JSON access log, written off the request path.
	AccessLog AccessLog `yaml:"access_log" json:"access_log"`
	// Tracing: OTLP export of the gateway's spans (wired by cmd/veer
	// through gateway/gatewayotel); off by default.
	Tracing Tracing `yaml:"tracing" json:"tracing"`
	// ControlStore: the control plane's etcd, whose criticality table and
	// limits documents replace the Shed and Limits sections while present
	// (FollowStore, wired by cmd/veer); off by default.
	ControlStore ControlStore `yaml:"control_store" json:"control_store"`
	// Async: the durable invocation queue (async routes, Prefer:
	// respond-async); off unless enabled or a route is async.
	Async Async `yaml:"async" json:"async"`
}

// ControlStore names the control plane's store the gateway follows. Only
// etcd: the control plane's embedded store is one process's bbolt file,
// which another process cannot follow.
type ControlStore struct {
	// Endpoints: etcd client URLs (http://10.0.0.1:2379); empty: the
	// gateway follows no store.
	Endpoints []string `yaml:"endpoints" json:"endpoints"`
	// Prefix namespaces veer's keys in etcd; default the control plane's
	// ("/veer/", storeetcd.DefaultPrefix).
	Prefix string `yaml:"prefix" json:"prefix"`
	// DialTimeout bounds connecting; default 2s.
	DialTimeout time.Duration `yaml:"dial_timeout" json:"dial_timeout"`
	// RequestTimeout bounds each read; default 2s.
	RequestTimeout time.Duration `yaml:"request_timeout" json:"request_timeout"`
}

// Tracing configures span export over OTLP/HTTP.
type Tracing struct {
	// OTLPEndpoint: host:port of the collector; empty: no export.
	OTLPEndpoint string `yaml:"otlp_endpoint" json:"otlp_endpoint"`
	// Insecure: plain HTTP to the collector.
	Insecure bool `yaml:"insecure" json:"insecure"`
	// ServiceName: default "veer-gateway".
	ServiceName string `yaml:"service_name" json:"service_name"`
}

// Listen configures the public listeners.
type Listen struct {
	// Addr serves HTTP/1.1 and HTTP/2 over TLS (TCP) and HTTP/3 (UDP) on
	// the same port; default "127.0.0.1:8443". "off" disables it.
	Addr string `yaml:"addr" json:"addr"`
	// Plain, when set, also serves plain HTTP/1.1 and h2c on this address.
	Plain string `yaml:"plain" json:"plain"`
	// CertFile and KeyFile: PEM files, reloaded when they change. Both
	// empty: a self-signed certificate is generated in DataDir.
	CertFile string `yaml:"cert_file" json:"cert_file"`
	KeyFile  string `yaml:"key_file" json:"key_file"`
	// DisableHTTP3 turns off the UDP listener and Alt-Svc.
	DisableHTTP3 bool `yaml:"disable_http3" json:"disable_http3"`
	// ReadHeaderTimeout stops slowloris; default 5s.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout" json:"read_header_timeout"`
	// ReadTimeout bounds reading one request with its body; default 60s.
	ReadTimeout time.Duration `yaml:"read_timeout" json:"read_timeout"`
	// WriteTimeout bounds writing one response; default 60s.
	WriteTimeout time.Duration `yaml:"write_timeout" json:"write_timeout"`
	// IdleTimeout closes idle keep-alive connections; default 90s.
	IdleTimeout time.Duration `yaml:"idle_timeout" json:"idle_timeout"`
	// MaxHeaderBytes: larger request headers get 431; default 64 KiB.
	MaxHeaderBytes int `yaml:"max_header_bytes" json:"max_header_bytes"`
	// ShutdownTimeout: how long SIGTERM waits for in-flight requests;
	// default 20s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout" json:"shutdown_timeout"`
}

// Admin configures the operations listener.
type Admin struct {
	// Addr of the admin listener; default none (no admin listener).
	Addr string `yaml:"addr" json:"addr"`
	// Token protects /admin/ (Authorization: Bearer TOKEN); empty: the
	// admin API answers 403 (health and metrics stay open).
	Token string `yaml:"token" json:"token"`
}

// Route sends requests matching Host and PathPrefix to its clusters.
type Route struct {
	// Name labels metrics and is the shed endpoint. Required, unique.
	Name string `yaml:"name" json:"name"`
	// Host: exact host, "*.example.com" (any subdomain) or empty (any).
	Host string `yaml:"host" json:"host"`
	// PathPrefix: default "/".
	PathPrefix string `yaml:"path_prefix" json:"path_prefix"`
	// Clusters, tried in order ("ordered") or spread by weight
	// ("weighted"). Required.
	Clusters []RouteCluster `yaml:"clusters" json:"clusters"`
	// Policy: "ordered" (default: the first available cluster takes all)
	// or "weighted".
	Policy string `yaml:"policy" json:"policy"`
	// HostRewrite replaces the Host header upstream; default: preserved.
	HostRewrite string `yaml:"host_rewrite" json:"host_rewrite"`
	// TryTimeout bounds one attempt until response headers. Default 0:
	// derived from what the route observes. An attempt that may be
	// retried on another cluster (a replayable request that is idempotent
	// or carries an Idempotency-Key) gets AutoTryFactor (8) × the p99 of
	// the route's answered attempts over the last 10-20 s, at least
	// MinAutoTryTimeout (100 ms), ColdTryTimeout (1 s) until 100 answers
	// are seen, doubled every 100 ms while more than EscalateShare (10 %)
	// of the attempts time out (a route that slows down as a whole raises
	// its own). Any other attempt (a POST
	// without a key, which a timeout could not move elsewhere) waits
	// until the route's timeout. Set it for a route whose answers are
	// bimodal (a 10 ms read beside a 20 s report).
	TryTimeout time.Duration `yaml:"try_timeout" json:"try_timeout"`
	// Timeout bounds the attempts in all; default 30s.
	Timeout time.Duration `yaml:"timeout" json:"timeout"`
	// StaleOnError keeps successful GET answers and serves them when every
	// attempt fails (e.g. a token endpoint, max_stale 24h). Off when nil.
	StaleOnError *cache.Config `yaml:"stale_on_error" json:"stale_on_error"`
	// SLO is the route's service-level objective (availability, latency):
	// `veer gateway slo-rules` turns it into Prometheus recording rules and
	// burn-rate alerts over the gateway's metrics. Off when nil.
	SLO *slo.Objective `yaml:"slo" json:"slo"`
	// TenantHeader names the request header whose value is the tenant a
	// rollout of the route (release.Rollout.Assign) sends to the old or
	// the new version; default DefaultTenantHeader (Veer-Tenant). A request
	// without it is tenant "".
	TenantHeader string `yaml:"tenant_header" json:"tenant_header"`
	// Async: requests are stored in the async queue and answered 202 with
	// an invocation id, then run by its workers (see Async).
	Async bool `yaml:"async" json:"async"`
}

// RouteCluster is a cluster named by a route.
type RouteCluster struct {
	Name string `yaml:"name" json:"name"`
	// Weight for the "weighted" policy; default 1.
	Weight int `yaml:"weight" json:"weight"`
}

// Cluster is a set of backends.
type Cluster struct {
	// Name, required and unique.
	Name string `yaml:"name" json:"name"`
	// Protocol upstream: "http1" (default), "h2c" (HTTP/2 without TLS,
	// e.g. gRPC) or "h2" (HTTP/2 over TLS).
	Protocol string `yaml:"protocol" json:"protocol"`
	// InsecureSkipVerify accepts any certificate from TLS backends.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify" json:"insecure_skip_verify"`
	// Backends: "host:port". Required.
	Backends []Backend `yaml:"backends" json:"backends"`
	// MaxIdlePerBackend keep-alive connections; default 64.
	MaxIdlePerBackend int `yaml:"max_idle_per_backend" json:"max_idle_per_backend"`
	// MaxConnsPerBackend caps connections; default 0 (no cap).
	MaxConnsPerBackend int `yaml:"max_conns_per_backend" json:"max_conns_per_backend"`
	// Health: active checks; off when Path is empty.
	Health Health `yaml:"health" json:"health"`
	// Outlier: passive ejection.
	Outlier Outlier `yaml:"outlier" json:"outlier"`
	// SlowStart ramps a returning backend's weight; default 10s.
	SlowStart time.Duration `yaml:"slow_start" json:"slow_start"`
	// MinHealthyShare: below this share of usable backends the cluster
	// hands its traffic to the route's other clusters; default 0.5.
	MinHealthyShare float64 `yaml:"min_healthy_share" json:"min_healthy_share"`
	// ReturnRamp: a cluster back above MinHealthyShare takes its traffic
	// back linearly over this long (5 % at once, then linearly); default 1s.
	ReturnRamp time.Duration `yaml:"return_ramp" json:"return_ramp"`
}

// Backend is one upstream server.
type Backend struct {
	Address string `yaml:"address" json:"address"`
	// Weight: default 1.
	Weight int `yaml:"weight" json:"weight"`
}

// Health configures active checks.
type Health struct {
	// Path checked with GET; empty: no active checks.
	Path string `yaml:"path" json:"path"`
	// Interval: default 2s. Timeout: default 1s.
	Interval time.Duration `yaml:"interval" json:"interval"`
	// UnhealthyInterval: how often a backend that is down or ejected is
	// checked; default 250ms (at most Interval). Rise successes in a row
	// bring a down backend back and end a passive ejection that began
	// before the checks failed: traffic returns soon after a heal.
	UnhealthyInterval time.Duration `yaml:"unhealthy_interval" json:"unhealthy_interval"`
	Timeout           time.Duration `yaml:"timeout" json:"timeout"`
	// Rise successes mark a backend up (default 2); Fall failures mark it
	// down (default 3).
	Rise int `yaml:"rise" json:"rise"`
	Fall int `yaml:"fall" json:"fall"`
}

// Outlier configures passive outlier detection.
type Outlier struct {
	// ConsecutiveErrors (connect errors or 5xx) eject; default 5.
	ConsecutiveErrors int `yaml:"consecutive_errors" json:"consecutive_errors"`
	// FailureRatio over at least MinRequests in 10s ejects; default 0.5
	// over 20.
	FailureRatio float64 `yaml:"failure_ratio" json:"failure_ratio"`
	MinRequests  int     `yaml:"min_requests" json:"min_requests"`
	// BaseEjection × n (n = times ejected), capped at MaxEjection;
	// defaults 30s and 5m.
	BaseEjection time.Duration `yaml:"base_ejection" json:"base_ejection"`
	MaxEjection  time.Duration `yaml:"max_ejection" json:"max_ejection"`
	// MaxEjectedShare of a cluster ejected at once; default 1: a cluster
	// whose backends all fail is emptied, and the route's other clusters
	// take its traffic (a cluster with none usable left is still used, in
	// panic mode, when no other cluster can serve).
	MaxEjectedShare float64 `yaml:"max_ejected_share" json:"max_ejected_share"`
}

// Retry configures cross-cluster retries. Attempts after the first go to
// another cluster of the route when there is one.
type Retry struct {
	// Policy: max_attempts (default 3, at most 3), backoff, max_wait.
	Policy retry.Config `yaml:"policy" json:"policy"`
	// Budget: default 50% of requests (at most 100%), at least
	// DefaultRetryBudgetMinPerSecond (100 per the default 10 s interval).
	Budget retry.BudgetConfig `yaml:"budget" json:"budget"`
	// MaxReplayBody: request bodies up to this size are buffered so that
	// they can be resent; larger ones are never retried. Default 1 MiB.
	MaxReplayBody int64 `yaml:"max_replay_body" json:"max_replay_body"`
	// Disabled: one attempt only.
	Disabled bool `yaml:"disabled" json:"disabled"`
}

// Limits configures flow control: limit.Config plus where each
// dimension's key comes from.
type Limits struct {
	limit.Config `yaml:",inline" json:",inline"`
	// Keys, one per dimension, in order: "route", "client_ip", "host" or
	// "header:NAME".
	Keys []string `yaml:"keys" json:"keys"`
	// Redis, when set, shares the limits through Redis (limitredis) at
	// this address; the local fallback enforces limits ÷ Instances.
	Redis string `yaml:"redis" json:"redis"`
	// Instances sharing the Redis limits; default 1.
	Instances int `yaml:"instances" json:"instances"`
}

// Shed wraps shed.Config with an on switch.
type Shed struct {
	Enabled     bool `yaml:"enabled" json:"enabled"`
	shed.Config `yaml:",inline" json:",inline"`
}

// Breaker wraps breaker.Config with an on switch.
type Breaker struct {
	Enabled        bool `yaml:"enabled" json:"enabled"`
	breaker.Config `yaml:",inline" json:",inline"`
}

// AccessLog configures the access log.
type AccessLog struct {
	// Path: "" (off), "stdout", "stderr" or a file.
	Path string `yaml:"path" json:"path"`
	// Queue: entries waiting for the workers; beyond it, entries are
	// dropped and counted. Default 4096.
	Queue int `yaml:"queue" json:"queue"`
	// Workers writing entries; default 1.
	Workers int `yaml:"workers" json:"workers"`
}

// withDefaults returns c with every zero field set to its documented
// default. It does not validate.
func (c Config) withDefaults() Config {
	l := &c.Listen
	if l.Addr == "" {
		l.Addr = DefaultListen
	}
	l.ReadHeaderTimeout = cmp.Or(l.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	l.ReadTimeout = cmp.Or(l.ReadTimeout, DefaultReadTimeout)
	l.WriteTimeout = cmp.Or(l.WriteTimeout, DefaultWriteTimeout)
	l.IdleTimeout = cmp.Or(l.IdleTimeout, DefaultIdleTimeout)
	l.MaxHeaderBytes = cmp.Or(l.MaxHeaderBytes, DefaultMaxHeaderBytes)
	l.ShutdownTimeout = cmp.Or(l.ShutdownTimeout, DefaultShutdownTimeout)
	c.DataDir = cmp.Or(c.DataDir, DefaultDataDir)
	c.Retry.MaxReplayBody = cmp.Or(c.Retry.MaxReplayBody, DefaultMaxReplayBody)
	c.Retry.Budget.Ratio = cmp.Or(c.Retry.Budget.Ratio, DefaultRetryBudgetRatio)
	if c.Retry.Budget.MinRetries == 0 {
		iv := cmp.Or(c.Retry.Budget.Interval, retry.DefaultBudgetInterval)
		c.Retry.Budget.MinRetries = max(1, int(DefaultRetryBudgetMinPerSecond*iv.Seconds()))
	}
	if c.Shed.Limit.Static == 0 {
		c.Shed.Limit.Initial = cmp.Or(c.Shed.Limit.Initial, DefaultShedInitialLimit)
	}
	c.AccessLog.Queue = cmp.Or(c.AccessLog.Queue, DefaultAccessLogQueue)
	c.AccessLog.Workers = cmp.Or(c.AccessLog.Workers, DefaultAccessLogWorkers)
	c.Limits.Instances = cmp.Or(c.Limits.Instances, 1)
	c.Clusters = slices.Clone(c.Clusters)
	for i := range c.Clusters {
		cl := &c.Clusters[i]
		cl.Protocol = cmp.Or(cl.Protocol, "http1")
		cl.MaxIdlePerBackend = cmp.Or(cl.MaxIdlePerBackend, DefaultMaxIdlePerBackend)
		cl.SlowStart = cmp.Or(cl.SlowStart, DefaultSlowStart)
		cl.MinHealthyShare = cmp.Or(cl.MinHealthyShare, DefaultMinHealthyShare)
		cl.ReturnRamp = cmp.Or(cl.ReturnRamp, DefaultReturnRamp)
		h := &cl.Health
		h.Interval = cmp.Or(h.Interval, DefaultHealthInterval)
		h.UnhealthyInterval = cmp.Or(h.UnhealthyInterval, min(h.Interval, DefaultUnhealthyInterval))
		h.Timeout = cmp.Or(h.Timeout, DefaultHealthTimeout)
		h.Rise = cmp.Or(h.Rise, DefaultRise)
		h.Fall = cmp.Or(h.Fall, DefaultFall)
		o := &cl.Outlier
		o.ConsecutiveErrors = cmp.Or(o.ConsecutiveErrors, DefaultConsecutiveErrors)
		o.FailureRatio = cmp.Or(o.FailureRatio, DefaultFailureRatio)
		o.MinRequests = cmp.Or(o.MinRequests, DefaultRatioMinRequests)
		o.BaseEjection = cmp.Or(o.BaseEjection, DefaultBaseEjection)
		o.MaxEjection = cmp.Or(o.MaxEjection, DefaultMaxEjection)
		o.MaxEjectedShare = cmp.Or(o.MaxEjectedShare, DefaultMaxEjectedShare)
		cl.Backends = slices.Clone(cl.Backends)
		for j := range cl.Backends {
			cl.Backends[j].Weight = cmp.Or(cl.Backends[j].Weight, 1)
		}
	}
	c.Routes = slices.Clone(c.Routes)
	for i := range c.Routes {
		r := &c.Routes[i]
		r.PathPrefix = cmp.Or(r.PathPrefix, "/")
		r.Policy = cmp.Or(r.Policy, "ordered")
		r.Timeout = cmp.Or(r.Timeout, DefaultTotalTimeout)
		r.TenantHeader = cmp.Or(r.TenantHeader, DefaultTenantHeader)
		r.Host = strings.ToLower(r.Host)
		r.Clusters = slices.Clone(r.Clusters)
		for j := range r.Clusters {
			r.Clusters[j].Weight = cmp.Or(r.Clusters[j].Weight, 1)
		}
	}
	return c
}
