package gateway

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/async"
	"github.com/veerhq/veer/breaker"
	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/limit"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/retry"
	"github.com/veerhq/veer/shed"
)

// Options are the run-time wiring of a Gateway. The zero value works for a
// config without limits.redis.
type Options struct {
	// Logger receives operational events; default slog.Default().
	Logger *slog.Logger
	// Registerer receives the metrics; default
	// prometheus.DefaultRegisterer.
	Registerer prometheus.Registerer
	// Gatherer serves /metrics on the admin listener; default
	// prometheus.DefaultGatherer.
	Gatherer prometheus.Gatherer
	// SharedLimiter builds the limiter shared through Redis when the
	// config names one (limits.redis); cmd/veer wires limitredis here so
	// that this package does not import a Redis client. Required then.
	SharedLimiter func(l Limits) (limit.Admitter, error)
	// DialContext connects to backends; default a net.Dialer with a 2 s
	// connect timeout. Tests use in-memory pipes here.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// OnSpan, if set, receives the gateway's span of every request once
	// its response is written, on the request's goroutine: it must not
	// block (gateway/gatewayotel queues and drops).
	OnSpan func(Span)
	// SampleNewTraces marks the traces the gateway starts as sampled
	// (traceparent flags 01); set it when spans are exported.
	SampleNewTraces bool
	// HTTP3 starts the HTTP/3 listener (gateway/gatewayh3.Listen); nil:
	// no HTTP/3 and no Alt-Svc.
	HTTP3 HTTP3Func
	// AsyncEngine opens the async queue's engine when the config uses it
	// (gateway/gatewayasync.Engine); required then.
	AsyncEngine AsyncEngineFunc
	// OnAsyncStatus, if set, sees every status the async workers record.
	OnAsyncStatus func(async.Status)
}

// Gateway is the edge proxy. Build it with New, start it with Start, feed
// it new configs with Apply, stop it with Shutdown.
type Gateway struct {
	opts Options
	log  *slog.Logger
	reg  prometheus.Registerer
	m    *metrics

	snap    atomic.Pointer[table]
	ready   atomic.Bool
	handler http.Handler

	mu       sync.Mutex // serialises Apply and the store follower
	file     Config     // the file's config last applied (store documents not merged)
	ov       overlay    // the store's documents in force over file
	backends map[string]*backend
	cstates  map[string]*clusterState
	breakers map[string]*breakerEntry
	health   *healthChecks

	limiter  *limit.Limiter // local limits; nil when shared or none
	admitter limit.Admitter
	shedder  *shed.Shedder
	callers  callerLog // the callers seen at shed admission (callers.go)
	alog     *accessLog
	body     *limit.BodyGuard // limits.max_request_body, applied after the route match

	refusalLog logRate     // bounds the log lines of refused requests
	disp       *dispatcher // the relay's (relay.go)

	srv  servers
	rngs sync.Pool

	rel releases // the rollouts applied (release documents followed)

	async       *async.Service // nil when off
	asyncTenant keySource

	fault func(step string) error // tests only: see applyFault
}

func (g *Gateway) rng() *rand.Rand {
	if r, ok := g.rngs.Get().(*rand.Rand); ok {
		return r
	}
	return rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
}

type breakerEntry struct {
	cfg breaker.Config
	b   *breaker.Breaker
}

// New validates cfg, builds the gateway and its first snapshot. It does not
// listen: call Start.
func New(cfg Config, opts Options) (*Gateway, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := cfg.withDefaults()
	g := &Gateway{
		opts:     opts,
		log:      obs.LoggerOr(opts.Logger),
		reg:      opts.Registerer,
		backends: map[string]*backend{},
		cstates:  map[string]*clusterState{},
		breakers: map[string]*breakerEntry{},
		file:     cfg,
		ov:       overlay{seen: map[string]int64{}},
	}
	if g.reg == nil {
		g.reg = prometheus.DefaultRegisterer
	}
	g.m = newMetrics(g.reg)
	g.rel.m = g.m
	if err := g.buildLimits(c); err != nil {
		return nil, err
	}
	if c.Shed.Enabled {
		sc := c.Shed.Config
		sc.Registerer, sc.Logger = g.reg, g.log
		// a proxy's handler waits on the network: no run-queue yield
		// before it (shed.Config.IOBound; docs/gateway.md, Benchmark)
		sc.IOBound = true
		s, err := shed.New(sc)
		if err != nil {
			return nil, config.In("shed", err)
		}
		g.shedder = s
	}
	alog, err := newAccessLog(c.AccessLog, g.m.logDropped)
	if err != nil {
		return nil, config.In("access_log", err)
	}
	g.alog = alog
	g.disp = &dispatcher{g: g}
	g.body = limit.NewBodyGuard(g.reg)
	g.refusalLog.max = MaxRefusalLogsPerSecond
	g.handler = http.HandlerFunc(g.serveHTTP)
	nc, err := g.compile(&c)
	if err != nil {
		return nil, err
	}
	t := nc.commit(g)
	g.snap.Store(t)
	if err := g.startAsync(&c); err != nil {
		return nil, err
	}
	g.health = startHealth(g, t)
	g.ready.Store(true)
	return g, nil
}

func (g *Gateway) buildLimits(c Config) error {
	if len(c.Limits.Dimensions) == 0 {
		return nil
	}
	if c.Limits.Redis != "" {
		if g.opts.SharedLimiter == nil {
			return config.Field("limits.redis", "this build has no shared limiter wired (Options.SharedLimiter)")
		}
		a, err := g.opts.SharedLimiter(c.Limits)
		if err != nil {
			return config.In("limits", err)
		}
		g.admitter = a
		return nil
	}
	l, err := limit.New(c.Limits.Config, limit.Options{Registerer: g.reg})
	if err != nil {
		return config.In("limits", err)
	}
	g.limiter, g.admitter = l, l
	return nil
}

// Config returns the config in force, with defaults applied.
func (g *Gateway) Config() Config { return *g.snap.Load().cfg }

// ServeHTTP proxies one request: the handler Start's listeners use.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) { g.handler.ServeHTTP(w, r) }

// Apply validates cfg and swaps it in as a whole, or returns an error
// naming the field and keeps the config in force. Fields that cannot change
// at run time (listeners, admin, data dir, shared-limit Redis, shed on/off,
// access log path) are rejected when they differ. Usable from a file
// watcher or SIGHUP. While FollowStore has store documents in force, they
// replace cfg's shed table and limits (see FollowStore). A rejected Apply
// changes nothing: the config is built into new values (clusters,
// backends, breakers, caches) that are swapped in only once every step that
// can refuse has passed, so the live state of a cluster the rejected config
// dropped (its ejections, health, drains, breaker) is still there. The shed
// section's wiring fields (Clock, Logger, Registerer, Endpoint) are New's:
// Apply ignores them, so the config New took can be applied again.
func (g *Gateway) Apply(cfg Config) (err error) {
	defer func() {
		res := "ok"
		if err != nil {
			res = "invalid"
			g.log.Error("config rejected; the previous config stays in force", "err", err)
		}
		g.m.reloads.WithLabelValues(res).Inc()
	}()
	if err := cfg.Validate(); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	eff, err := g.ov.over(cfg)
	if err != nil {
		return err
	}
	if err := g.swapLocked(eff); err != nil {
		return err
	}
	g.file = cfg
	return nil
}

// swapLocked applies a valid config (the file's with the store's documents
// over it) as a whole, or returns an error naming the field and keeps the
// config in force. g.mu is held.
func (g *Gateway) swapLocked(cfg Config) error {
	c := cfg.withDefaults()
	old := g.snap.Load().cfg
	var errs []error
	fixed := func(name string, a, b any) {
		if !reflect.DeepEqual(a, b) {
			errs = append(errs, config.Field(name, "cannot change at run time; restart the gateway"))
		}
	}
	fixed("listen", old.Listen, c.Listen)
	fixed("admin", old.Admin, c.Admin)
	fixed("data_dir", old.DataDir, c.DataDir)
	fixed("limits.redis", old.Limits.Redis, c.Limits.Redis)
	fixed("shed.enabled", old.Shed.Enabled, c.Shed.Enabled)
	fixed("shed.max_endpoints", old.Shed.MaxEndpoints, c.Shed.MaxEndpoints)
	fixed("access_log", old.AccessLog, c.AccessLog)
	fixed("tracing", old.Tracing, c.Tracing)
	fixed("control_store", old.ControlStore, c.ControlStore)
	errs = append(errs, g.asyncFixed(old, &c)...)
	if (len(old.Limits.Dimensions) == 0) != (len(c.Limits.Dimensions) == 0) {
		errs = append(errs, config.Field("limits.dimensions", "turning limits on or off needs a restart"))
	}
	if g.admitter != nil && g.limiter == nil && !reflect.DeepEqual(old.Limits, c.Limits) {
		errs = append(errs, config.Field("limits", "shared (Redis) limits cannot change at run time; restart the gateway"))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// every step that can fail comes before the first change
	nc, err := g.compile(&c)
	if err != nil {
		return err
	}
	if g.limiter != nil {
		if err := c.Limits.Config.Validate(); err != nil {
			return config.In("limits", err)
		}
	}
	if err := g.applyFault("shed"); err != nil {
		return err
	}
	// the shed table is the last step that can refuse (Shedder.Apply
	// changes nothing when it does); the limits were validated above
	if g.shedder != nil {
		if err := g.shedder.Apply(shedTable(c.Shed.Config)); err != nil {
			return config.In("shed", err)
		}
	}
	if g.limiter != nil {
		if err := g.limiter.Apply(c.Limits.Config); err != nil {
			return config.In("limits", err) // unreachable: validated above
		}
	}
	t := nc.commit(g)
	prev := g.snap.Swap(t)
	g.health.stop()
	g.health = startHealth(g, t)
	for _, cl := range prev.clusters {
		if nc := t.clusters[cl.cfg.Name]; nc == nil || nc.transport != cl.transport {
			if tr, ok := cl.transport.(interface{ CloseIdleConnections() }); ok {
				tr.CloseIdleConnections()
			}
		}
	}
	g.log.Info("config applied", "routes", len(c.Routes), "clusters", len(c.Clusters))
	return nil
}

// compiled is a config built into new values: the snapshot and the live
// state that goes with it (kept from the state in force for the backends,
// clusters and breakers that stay, new for the rest). Building one changes
// nothing; commit swaps its maps in.
type compiled struct {
	t        *table
	backends map[string]*backend
	cstates  map[string]*clusterState
	breakers map[string]*breakerEntry
	// series resolve the new routes', clusters' and backends' metric
	// series at commit: a rejected config adds none to /metrics
	series []func()
}

// commit makes nc's live state the gateway's (g.mu held, or New) and
// returns the snapshot to publish.
func (nc *compiled) commit(g *Gateway) *table {
	for _, f := range nc.series {
		f()
	}
	g.backends, g.cstates, g.breakers = nc.backends, nc.cstates, nc.breakers
	return nc.t
}

// compile builds a defaulted, valid config into new values, reusing the
// live state of the backends, clusters, breakers, route latencies and
// caches that stay. It reads the gateway's state and changes none of it,
// so that a step that fails leaves the config in force untouched.
func (g *Gateway) compile(c *Config) (*compiled, error) {
	now := time.Now()
	t := &table{cfg: c, clusters: map[string]*cluster{}, keys: parseKeys(c.Limits.Keys)}
	nc := &compiled{t: t, backends: map[string]*backend{}, cstates: map[string]*clusterState{}, breakers: map[string]*breakerEntry{}}
	for _, n := range c.TrustedNetworks {
		t.trusted = append(t.trusted, netip.MustParsePrefix(n))
	}
	prev := g.snap.Load() // nil in New
	var err error
	if t.retrier, err = g.compileRetrier(prev, c); err != nil {
		return nil, err
	}
	if err := g.applyFault("retry"); err != nil {
		return nil, err
	}
	for _, cc := range c.Clusters {
		cl, err := g.compileCluster(nc, prev, c, cc, now)
		if err != nil {
			return nil, err
		}
		t.clusters[cc.Name] = cl
		if err := g.applyFault("cluster " + cc.Name); err != nil {
			return nil, err
		}
	}
	routes := make([]*route, 0, len(c.Routes))
	for _, rc := range c.Routes {
		r, err := g.compileRoute(nc, prev, rc)
		if err != nil {
			return nil, err
		}
		if err := g.applyFault("route " + rc.Name); err != nil {
			return nil, err
		}
		routes = append(routes, r)
	}
	t.buildRoutes(routes)
	return nc, nil
}

// compileRetrier keeps the retrier (and its budget) while the retry config
// stays, else builds a new one.
func (g *Gateway) compileRetrier(prev *table, c *Config) (*retry.Retrier, error) {
	if prev != nil && reflect.DeepEqual(prev.cfg.Retry, c.Retry) {
		return prev.retrier, nil
	}
	budget, err := retry.NewBudget(c.Retry.Budget)
	if err != nil {
		return nil, config.In("retry.budget", err)
	}
	r, err := retry.New(c.Retry.Policy, retry.Options{Name: "gateway", Budget: budget, Registerer: g.reg})
	if err != nil {
		return nil, config.In("retry.policy", err)
	}
	return r, nil
}

// compileCluster builds one cluster into nc: its transport (kept while the
// transport fields stay), its state, backends and breaker (kept by name and
// address from the gateway's live state).
func (g *Gateway) compileCluster(nc *compiled, prev *table, c *Config, cc Cluster, now time.Time) (*cluster, error) {
	cl := &cluster{cfg: cc, m: &clusterMetrics{}}
	nc.series = append(nc.series, func() {
		*cl.m = clusterMetrics{panics: g.m.panics.WithLabelValues(cc.Name), stalled: g.m.stalled.WithLabelValues(cc.Name), breaker: g.m.breakerSt.WithLabelValues(cc.Name)}
	})
	if pc := prev.clusterNamed(cc.Name); pc != nil && transportEqual(pc.cfg, cc) {
		cl.transport = pc.transport
	} else {
		cl.transport = newTransport(cc, g.opts.DialContext)
	}
	st := g.cstates[cc.Name]
	if st == nil {
		st = &clusterState{}
		st.upSince.Store(now.Add(-cc.ReturnRamp).UnixNano())
	}
	nc.cstates[cc.Name] = st
	cl.state = st
	sum := 0
	for _, bc := range cc.Backends {
		key := cc.Name + "/" + bc.Address
		b := g.backends[key]
		if b == nil {
			b = newBackend(cc.Name, bc.Address, now.Add(-cc.SlowStart))
			nb, addr := b, bc.Address
			nc.series = append(nc.series, func() { nb.attempts = g.m.attemptCounters(cc.Name, addr) })
		}
		nc.backends[key] = b
		cl.backends = append(cl.backends, b)
		sum += bc.Weight
		cl.cum = append(cl.cum, sum)
	}
	if c.Breaker.Enabled {
		e := g.breakers[cc.Name]
		if e == nil || !reflect.DeepEqual(e.cfg, c.Breaker.Config) {
			b, err := breaker.New(c.Breaker.Config, breaker.Options{Name: "gateway_" + cc.Name, Registerer: g.reg, Logger: g.log})
			if err != nil {
				return nil, config.In("breaker", err)
			}
			e = &breakerEntry{cfg: c.Breaker.Config, b: b}
		}
		nc.breakers[cc.Name] = e
		cl.breaker = e.b
	}
	return cl, nil
}

// compileRoute builds one route over nc's clusters, keeping its latency
// tracker by name and its stale-on-error cache while that config stays.
func (g *Gateway) compileRoute(nc *compiled, prev *table, rc Route) (*route, error) {
	r := &route{cfg: rc, prefix: rc.PathPrefix, weighted: rc.Policy == "weighted"}
	nc.series = append(nc.series, func() { r.m = g.m.forRoute(rc.Name) })
	for _, x := range rc.Clusters {
		r.clusters = append(r.clusters, nc.t.clusters[x.Name])
		r.weights = append(r.weights, x.Weight)
	}
	pr := prev.routeNamed(rc.Name)
	r.lat = newLatencyTracker()
	if pr != nil {
		r.lat = pr.lat
	}
	if rc.StaleOnError != nil {
		if pr != nil && pr.cache != nil && reflect.DeepEqual(*pr.cfg.StaleOnError, *rc.StaleOnError) {
			r.cache = pr.cache
		} else {
			var err error
			if r.cache, err = newAnswerCache(g, *rc.StaleOnError, rc.Name); err != nil {
				return nil, config.In("routes."+rc.Name+".stale_on_error", err)
			}
		}
	}
	return r, nil
}

// shedTable is the part of a shed.Config that Apply changes: its wiring
// fields (Clock, Logger, Registerer, Endpoint, IOBound) are New's and stay.
func shedTable(c shed.Config) shed.Config {
	c.Clock, c.Logger, c.Registerer, c.Endpoint, c.IOBound = nil, nil, nil, nil, false
	return c
}

func (t *table) clusterNamed(name string) *cluster {
	if t == nil {
		return nil
	}
	return t.clusters[name]
}

func (t *table) routeNamed(name string) *route {
	if t == nil {
		return nil
	}
	for _, r := range t.routes {
		if r.cfg.Name == name {
			return r
		}
	}
	return nil
}

func transportEqual(a, b Cluster) bool {
	return a.Protocol == b.Protocol && a.InsecureSkipVerify == b.InsecureSkipVerify &&
		a.MaxIdlePerBackend == b.MaxIdlePerBackend && a.MaxConnsPerBackend == b.MaxConnsPerBackend
}

// applyFault fails a config's compile or swap at a named step when a test
// set g.fault (a seam: nil outside tests, so every step passes).
func (g *Gateway) applyFault(step string) error {
	if g.fault == nil {
		return nil
	}
	return g.fault(step)
}
