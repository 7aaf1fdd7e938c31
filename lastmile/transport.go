package lastmile

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/outcome"
)

// Transport is the last-mile chain as an http.RoundTripper. Create it with
// New; it is safe for concurrent use. Close it to release connections and
// background handshakes.
type Transport struct {
	cfg   Config
	opts  Options
	clk   clock.Clock
	log   *slog.Logger
	m     *metrics
	res   *Resolver
	racer *racer
	sched *scheduler

	servedRoute prometheus.Counter // pre-bound: the hot path does no label lookup

	network atomic.Uint64
	routes  atomic.Pointer[routeTable]

	bg     context.Context // chain runs' context: canceled by Close
	stopBG context.CancelFunc
	runs   sync.WaitGroup

	mu        sync.Mutex   // guards routes writes, nodes, flights, failed, netName, otherNets
	netName   string       // Options.NetworkName of the current network
	otherNets []protoEntry // persisted broken marks of other named networks
	nodes     map[nodeKey]*nodeRT
	flights   map[routeKey]*flight
	failed    map[routeKey]failedRun
	closed    bool
}

var _ http.RoundTripper = (*Transport)(nil)

// routeKey identifies what a request asks for.
type routeKey struct {
	tls  bool
	host string // as in the URL: host or host:port
}

type routeTable map[routeKey]*route

// route is a working way to reach a host: immutable but for its failure
// count.
type route struct {
	step       RouteStep
	resolver   ResolverStep
	addr       string
	serverName string
	proto      string
	network    uint64
	rt         *nodeRT
	failures   atomic.Int32
}

type nodeKey struct {
	addr, sni string
	proto     Protocol
	tls       bool
}

// New returns a Transport for cfg. It validates cfg and loads the DNS cache
// file if one is configured.
func New(cfg Config, opts Options) (*Transport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	t := &Transport{
		cfg:     cfg,
		opts:    opts,
		clk:     clock.Or(opts.Clock),
		log:     obs.LoggerOr(opts.Logger),
		m:       newMetrics(opts.Registerer),
		nodes:   map[nodeKey]*nodeRT{},
		flights: map[routeKey]*flight{},
		failed:  map[routeKey]failedRun{},
	}
	t.bg, t.stopBG = context.WithCancel(context.Background())
	t.res = newResolver(cfg.DNS, opts, t.m)
	t.racer = newRacer(cfg.Race, opts, t.m)
	if cfg.Scheduler.URL != "" {
		t.sched = newScheduler(cfg.Scheduler, opts, t.res, t.racer, t.m)
	}
	t.servedRoute = t.m.served.WithLabelValues(string(StepRoute))
	t.routes.Store(&routeTable{})
	t.loadProtocolMemory()
	return t, nil
}

// Resolver returns the Transport's resolver chain (shared cache).
func (t *Transport) Resolver() *Resolver { return t.res }

// RoundTrip sends req over the host's working route, or finds one first.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL == nil || req.URL.Host == "" {
		return nil, errors.New("lastmile: request without URL host")
	}
	key := routeKey{tls: req.URL.Scheme != "http", host: req.URL.Host}
	tr := TraceFrom(req.Context())
	if r := (*t.routes.Load())[key]; r != nil {
		t.servedRoute.Inc()
		if tr != nil {
			tr.fill(req.URL.Host, StepRoute, r, 0)
		}
		resp, err := t.send(r, req, tr)
		if err == nil {
			return resp, nil
		}
		return t.reroute(req, key, r, tr, err)
	}
	ctx := req.Context()
	if tr == nil && t.opts.OnTrace != nil {
		tr = &Trace{}
		ctx = WithTrace(ctx, tr)
	}
	r, err := t.discover(ctx, key, tr)
	if t.opts.OnTrace != nil {
		t.opts.OnTrace(tr)
	}
	if err != nil {
		return nil, err
	}
	return t.send(r, req, tr)
}

// reroute handles a failure on a reused route. When the request certainly
// never reached the node (outcome.Kind.NotSent: a refused or timed-out
// dial, a failed handshake) and its body can be replayed, the route is
// dropped and the request goes once through a fresh chain run, so that a
// dead node costs no failed request. Otherwise the error is returned.
func (t *Transport) reroute(req *http.Request, key routeKey, r *route, tr *Trace, err error) (*http.Response, error) {
	k := outcome.ClassifyError(err)
	if !k.NotSent() || req.Context().Err() != nil {
		return nil, err
	}
	if req.Body != nil && req.Body != http.NoBody {
		if req.GetBody == nil {
			return nil, err
		}
		body, berr := req.GetBody()
		if berr != nil {
			return nil, err
		}
		req = req.Clone(req.Context())
		req.Body = body
	}
	t.dropRoute(r)
	nr, derr := t.discover(req.Context(), key, tr)
	if t.opts.OnTrace != nil && tr != nil {
		t.opts.OnTrace(tr)
	}
	if derr != nil {
		return nil, derr
	}
	return t.send(nr, req, tr)
}

// send carries req over r and counts consecutive network failures; after
// MaxRouteFailures the route is dropped so that the next request re-runs
// the chain. A failure is recorded in tr as a StepRoute failure.
func (t *Transport) send(r *route, req *http.Request, tr *Trace) (*http.Response, error) {
	resp, err := r.rt.RoundTrip(req)
	if err != nil {
		if k := outcome.ClassifyError(err); k.Network() {
			tr.fail(Failure{Route: StepRoute, Target: r.addr, Kind: k, Err: err})
			t.m.fail(string(StepRoute), k)
			if int(r.failures.Add(1)) >= t.cfg.MaxRouteFailures {
				t.dropRoute(r)
			}
		}
		return nil, err
	}
	if r.failures.Load() != 0 {
		r.failures.Store(0)
	}
	return resp, nil
}

func (t *Transport) dropRoute(r *route) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := *t.routes.Load()
	next := make(routeTable, len(old))
	for k, v := range old {
		if v != r {
			next[k] = v
		}
	}
	t.routes.Store(&next)
}

func (t *Transport) setRoute(k routeKey, r *route) {
	old := *t.routes.Load()
	next := make(routeTable, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[k] = r
	t.routes.Store(&next)
}

// NetworkChanged tells the Transport that the device changed network: every
// route and connection is dropped, the scheduler's answers are forgotten and
// broken-protocol memory starts afresh for the new network; the next request
// re-runs the chain. The DNS cache is kept (it is what survives outages).
func (t *Transport) NetworkChanged() {
	n := t.network.Add(1)
	t.switchNetwork(n-1, n)
	t.res.forgetDead()
	if t.sched != nil {
		t.sched.forget()
	}
	t.mu.Lock()
	t.routes.Store(&routeTable{})
	clear(t.failed)
	nodes := t.nodes
	t.nodes = map[nodeKey]*nodeRT{}
	t.mu.Unlock()
	for _, n := range nodes {
		n.close()
	}
}

// Close releases every connection and waits for background handshakes.
func (t *Transport) Close() error {
	t.stopBG()
	t.mu.Lock()
	t.closed = true
	t.routes.Store(&routeTable{})
	nodes := t.nodes
	t.nodes = map[nodeKey]*nodeRT{}
	t.mu.Unlock()
	t.racer.close()
	t.runs.Wait()
	for _, n := range nodes {
		n.close()
	}
	return t.res.Close()
}

// CloseIdleConnections closes idle connections of every node.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, n := range t.nodes {
		if n.tcp != nil {
			n.tcp.CloseIdleConnections()
		}
		if n.h3 != nil {
			n.h3.CloseIdleConnections()
		}
	}
}

// fill records the route that serves a request.
func (tr *Trace) fill(host string, served RouteStep, r *route, chain time.Duration) {
	if tr == nil {
		return
	}
	tr.mu.Lock()
	tr.Host = host
	tr.Served = served
	tr.Resolver = r.resolver
	tr.Protocol = r.proto
	tr.Addr = r.addr
	tr.ServerName = r.serverName
	tr.Chain = chain
	tr.mu.Unlock()
}
