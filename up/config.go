package up

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/veerhq/veer/config"
)

// Defaults of Config, each filled by withDefaults.
const (
	// DefaultDevices fits one core with the rest of the system.
	DefaultDevices = 50
	// DefaultRate is each device's requests per second.
	DefaultRate = 2.0
	// DefaultOneWay is the smallest one-way delay of a device's network;
	// devices get 1x to 4x of it.
	DefaultOneWay = 5 * time.Millisecond
	// DefaultRequestTimeout bounds one app request.
	DefaultRequestTimeout = 2 * time.Second
	// DefaultRestartAfter is how long a child process that died stays down
	// before the supervisor starts it again.
	DefaultRestartAfter = 15 * time.Second
	// DefaultBackendCPU is the CPU a backend spends on /api/trips.
	DefaultBackendCPU = 200 * time.Microsecond
	// DefaultBackendLatency is the dependency wait of /api/trips.
	DefaultBackendLatency = 5 * time.Millisecond
	// DefaultFeedSlots is how many /api/feed requests one backend serves at
	// once (its dependency's pool); more wait in the backend. With the
	// default latency site a's two serving backends answer about 200 feed
	// requests/s: the capacity the overload scenario multiplies.
	DefaultFeedSlots = 1
	// DefaultRecoveryTimeout and DefaultRecoveryTimeoutStep are the demo
	// app's failover recovery timer (first probe, linear growth).
	DefaultRecoveryTimeout     = 5 * time.Second
	DefaultRecoveryTimeoutStep = 5 * time.Second
	// DefaultSiteBShare is the percentage of devices the routing table
	// sends to site b (a bucket rule); the rest go to site a.
	DefaultSiteBShare = 30
	// DefaultHealthInterval and DefaultHealthFall are the gateways' active
	// checks of the backends: a dead cluster is left within about one
	// second, before the retry budget (20 % of requests) runs out (see
	// docs/chaos.md: with the gateway's 2s x 3 it runs out).
	DefaultHealthInterval = 500 * time.Millisecond
	DefaultHealthFall     = 2
	// DefaultDNSTimeout bounds one step of a device's resolver chain
	// (loopback DNS answers in microseconds; a dead one costs this).
	DefaultDNSTimeout = 500 * time.Millisecond
	// DefaultZone is the zone of the access domains.
	DefaultZone = "veer.test"
	// DefaultReportLatency is what one /api/reports invocation (the async
	// route) waits on its dependency: a report takes a while.
	DefaultReportLatency = 250 * time.Millisecond
	// DefaultAsyncRate is veer up's steady async submissions per second to
	// each gateway (each polled until it ran).
	DefaultAsyncRate = 1.0
	// DefaultAsyncWorkers is each gateway's async worker count (the general
	// group's concurrency): with DefaultReportLatency a gateway runs about
	// 16 reports/s, so a burst above that queues.
	DefaultAsyncWorkers = 4
)

// Config is what `veer up --config FILE` says. The zero value works: 50
// devices at 2 requests/s each over two sites.
type Config struct {
	// Devices is the client population; default DefaultDevices.
	Devices int `yaml:"devices" json:"devices"`
	// Rate is each device's requests per second; default DefaultRate.
	Rate float64 `yaml:"rate" json:"rate"`
	// OneWay is the smallest one-way network delay of a device (device i
	// gets (1 + i mod 4) x OneWay); default DefaultOneWay.
	OneWay time.Duration `yaml:"one_way" json:"one_way"`
	// Loss is each device's packet loss probability per direction; default 0.
	Loss float64 `yaml:"loss" json:"loss"`
	// RequestTimeout bounds one app request; default DefaultRequestTimeout.
	RequestTimeout time.Duration `yaml:"request_timeout" json:"request_timeout"`
	// RestartAfter: a dead child process is started again after this long;
	// default DefaultRestartAfter.
	RestartAfter time.Duration `yaml:"restart_after" json:"restart_after"`
	// SiteBShare is the percentage of devices routed to site b; default
	// DefaultSiteBShare (0 is the default too; use 100 for all).
	SiteBShare int `yaml:"site_b_share" json:"site_b_share"`
	// Zone of the access domains; default DefaultZone.
	Zone string `yaml:"zone" json:"zone"`
	// Backend is the demo backends' cost per request.
	Backend BackendConfig `yaml:"backend" json:"backend"`
	// Failover is the demo app's failover setting.
	Failover FailoverConfig `yaml:"failover" json:"failover"`
	// LastMile is the devices' last-mile chain.
	LastMile LastMileConfig `yaml:"lastmile" json:"lastmile"`
	// Gateway switches gateway protections off (for chaos's FAIL tests).
	Gateway GatewayConfig `yaml:"gateway" json:"gateway"`
	// Store is the control plane's store: "" (embedded bbolt in the data
	// directory), "etcd://local" (veer up runs etcd as a child process) or
	// "etcd://HOST:PORT[,HOST:PORT]" (an external cluster). See engines.go.
	Store string `yaml:"store" json:"store"`
	// Redis shares the gateways' limits: "" (each gateway limits locally
	// to its share), "local" (veer up runs redis-server as a child
	// process) or "redis://HOST:PORT" (an external server).
	Redis string `yaml:"redis" json:"redis"`
	// Search is the limited demo route, /api/search.
	Search SearchConfig `yaml:"search" json:"search"`
	// Async is the demo's async route (/api/reports) and its queue.
	Async AsyncConfig `yaml:"async" json:"async"`
}

// AsyncConfig is the async route's queue and veer up's steady submitter.
type AsyncConfig struct {
	// NATS: empty, each gateway runs embedded JetStream in its data dir;
	// "local", veer up starts Debian's nats-server -js as a supervised
	// child (store in DATA/nats) and both gateways use it; else the
	// comma-separated URLs of an external NATS cluster both gateways use.
	NATS string `yaml:"nats" json:"nats"`
	// Rate is veer up's steady submissions/s to each gateway; default
	// DefaultAsyncRate.
	Rate float64 `yaml:"rate" json:"rate"`
	// Workers is each gateway's async worker count; default
	// DefaultAsyncWorkers.
	Workers int `yaml:"workers" json:"workers"`
	// Ephemeral: the gateways' embedded queue store is wiped before each
	// start, as for a gateway whose data dir is not a persistent volume.
	// For async-kill's FAIL-when-off test; embedded engine only.
	Ephemeral bool `yaml:"ephemeral" json:"ephemeral"`
}

// natsURLs is the external cluster's URLs (nil: embedded or local).
func (a AsyncConfig) natsURLs() []string {
	if a.NATS == "" || a.NATS == NATSLocal {
		return nil
	}
	var out []string
	for _, u := range strings.Split(a.NATS, ",") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	return out
}

// NATSLocal is AsyncConfig.NATS's value for a nats-server child of veer up.
const NATSLocal = "local"

// BackendConfig is a demo backend's cost per request.
type BackendConfig struct {
	// CPU spent per /api/trips request; /api/feed spends twice it.
	// Default DefaultBackendCPU.
	CPU time.Duration `yaml:"cpu" json:"cpu"`
	// Latency waited per /api/trips request (a dependency); /api/feed
	// waits twice it. Default DefaultBackendLatency.
	Latency time.Duration `yaml:"latency" json:"latency"`
	// FeedSlots bounds a backend's concurrent /api/feed requests (a slow
	// dependency with N slots); default DefaultFeedSlots.
	FeedSlots int `yaml:"feed_slots" json:"feed_slots"`
	// Report is what one /api/reports invocation waits (plus CPU's cost);
	// default DefaultReportLatency.
	Report time.Duration `yaml:"report" json:"report"`
}

// FailoverConfig is the app side of seed 000 in the population.
type FailoverConfig struct {
	// Disabled: devices send every request to their primary domain (no
	// failover.Transport). For chaos's FAIL-when-off tests.
	Disabled bool `yaml:"disabled" json:"disabled"`
	// RecoveryTimeout and RecoveryTimeoutStep: defaults
	// DefaultRecoveryTimeout, DefaultRecoveryTimeoutStep.
	RecoveryTimeout     time.Duration `yaml:"recovery_timeout" json:"recovery_timeout"`
	RecoveryTimeoutStep time.Duration `yaml:"recovery_timeout_step" json:"recovery_timeout_step"`
}

// LastMileConfig is the devices' resolver chain.
type LastMileConfig struct {
	// DNSTimeout bounds one resolver step; default DefaultDNSTimeout.
	DNSTimeout time.Duration `yaml:"dns_timeout" json:"dns_timeout"`
	// Unprotected: no hijack check (expected ranges) and no serve-stale.
	// For chaos's FAIL-when-off tests.
	Unprotected bool `yaml:"unprotected" json:"unprotected"`
}

// GatewayConfig switches gateway features off.
type GatewayConfig struct {
	// RetryDisabled: one attempt per request (retry.disabled).
	RetryDisabled bool `yaml:"retry_disabled" json:"retry_disabled"`
	// HealthInterval and HealthFall: the backends' active checks; defaults
	// DefaultHealthInterval, DefaultHealthFall.
	HealthInterval time.Duration `yaml:"health_interval" json:"health_interval"`
	HealthFall     int           `yaml:"health_fall" json:"health_fall"`
	// ShedDisabled: no criticality shedding (shed.enabled false).
	ShedDisabled bool `yaml:"shed_disabled" json:"shed_disabled"`
	// LimitUndivided: the gateways are told they are one instance
	// (limits.instances 1), so that when Redis fails each falls back to
	// the whole limit instead of limit ÷ 2. For chaos's FAIL-when-off test
	// of redis-kill.
	LimitUndivided bool `yaml:"limit_undivided" json:"limit_undivided"`
}

func (c Config) withDefaults() Config {
	c.Devices = cmp.Or(c.Devices, DefaultDevices)
	c.Rate = cmp.Or(c.Rate, DefaultRate)
	c.OneWay = cmp.Or(c.OneWay, DefaultOneWay)
	c.RequestTimeout = cmp.Or(c.RequestTimeout, DefaultRequestTimeout)
	c.RestartAfter = cmp.Or(c.RestartAfter, DefaultRestartAfter)
	c.SiteBShare = cmp.Or(c.SiteBShare, DefaultSiteBShare)
	c.Zone = cmp.Or(c.Zone, DefaultZone)
	c.Backend.CPU = cmp.Or(c.Backend.CPU, DefaultBackendCPU)
	c.Backend.Latency = cmp.Or(c.Backend.Latency, DefaultBackendLatency)
	c.Backend.FeedSlots = cmp.Or(c.Backend.FeedSlots, DefaultFeedSlots)
	c.Backend.Report = cmp.Or(c.Backend.Report, DefaultReportLatency)
	c.Async.Rate = cmp.Or(c.Async.Rate, DefaultAsyncRate)
	c.Async.Workers = cmp.Or(c.Async.Workers, DefaultAsyncWorkers)
	c.LastMile.DNSTimeout = cmp.Or(c.LastMile.DNSTimeout, DefaultDNSTimeout)
	c.Gateway.HealthInterval = cmp.Or(c.Gateway.HealthInterval, DefaultHealthInterval)
	c.Gateway.HealthFall = cmp.Or(c.Gateway.HealthFall, DefaultHealthFall)
	c.Failover.RecoveryTimeout = cmp.Or(c.Failover.RecoveryTimeout, DefaultRecoveryTimeout)
	c.Failover.RecoveryTimeoutStep = cmp.Or(c.Failover.RecoveryTimeoutStep, DefaultRecoveryTimeoutStep)
	c.Search.Limit = cmp.Or(c.Search.Limit, DefaultSearchLimit)
	c.Search.Burst = cmp.Or(c.Search.Burst, DefaultSearchBurst)
	return c
}

// Validate names the bad field.
func (c *Config) Validate() error {
	var errs []error
	check := func(bad bool, field, problem string) {
		if bad {
			errs = append(errs, config.Field(field, "%s", problem))
		}
	}
	check(c.Devices < 0 || c.Devices > 5000, "devices", "must be 0..5000")
	check(c.Rate < 0 || c.Rate > 1000, "rate", "must be 0..1000 requests/s")
	check(c.OneWay < 0 || c.OneWay > 5*time.Second, "one_way", "must be 0..5s")
	check(c.Loss < 0 || c.Loss >= 1, "loss", "must be in [0, 1)")
	check(c.RequestTimeout < 0, "request_timeout", "must not be negative")
	check(c.RestartAfter < 0, "restart_after", "must not be negative")
	check(c.SiteBShare < 0 || c.SiteBShare > 100, "site_b_share", "must be 0..100")
	check(c.Backend.CPU < 0 || c.Backend.CPU > time.Second, "backend.cpu", "must be 0..1s")
	check(c.Backend.Latency < 0 || c.Backend.Latency > 10*time.Second, "backend.latency", "must be 0..10s")
	check(c.Backend.FeedSlots < 0 || c.Backend.FeedSlots > 10000, "backend.feed_slots", "must be 0..10000")
	check(c.Failover.RecoveryTimeout < 0, "failover.recovery_timeout", "must not be negative")
	check(c.Failover.RecoveryTimeoutStep < 0, "failover.recovery_timeout_step", "must not be negative")
	check(c.LastMile.DNSTimeout < 0, "lastmile.dns_timeout", "must not be negative")
	check(c.Gateway.HealthInterval < 0, "gateway.health_interval", "must not be negative")
	check(c.Gateway.HealthFall < 0, "gateway.health_fall", "must not be negative")
	check(c.Backend.Report < 0 || c.Backend.Report > time.Minute, "backend.report", "must be 0..1m")
	check(c.Async.Rate < 0 || c.Async.Rate > 1000, "async.rate", "must be 0..1000 submissions/s")
	check(c.Async.Workers < 0 || c.Async.Workers > 1000, "async.workers", "must be 0..1000")
	for _, u := range c.Async.natsURLs() {
		if !strings.HasPrefix(u, "nats://") && !strings.HasPrefix(u, "tls://") {
			check(true, "async.nats", fmt.Sprintf("%q: want local or nats://HOST:PORT[,...]", u))
		}
	}
	check(c.Async.Ephemeral && c.Async.NATS != "", "async.ephemeral", "only with the embedded engine (no async.nats)")
	errs = append(errs, c.validateEngines()...)
	return errors.Join(errs...)
}
