package lastmile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
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

	mu      sync.Mutex // guards routes writes, nodes, flights, failed
	nodes   map[nodeKey]*nodeRT
	flights map[routeKey]*flight
	failed  map[routeKey]failedRun
	closed  bool
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
	step       Step
	resolver   Step
	addr       string
	serverName string
	proto      string
	network    uint64
	rt         *nodeRT
	failures   atomic.Int32
}

type nodeKey struct {
	addr, sni string
	step      Step
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
			tr.fail(Failure{Step: StepRoute, Target: r.addr, Kind: k, Err: err})
			t.m.fail(StepRoute, k)
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
	t.racer.broken.forget(n)
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

// candidate is one address to race to.
type candidate struct {
	addr       string
	serverName string
	resolver   Step
	noH3       bool
}

// chain runs the route chain for k, recording into tr. ctx is the run's
// own context (see flight.go), not a caller's.
func (t *Transport) chain(ctx context.Context, k routeKey, tr *Trace) (*route, error) {
	start := t.clk.Now()
	network := t.network.Load()
	host, port := splitHostPort(k.host, t.defaultPort(k))
	var last error
	d := &discovery{}
	for _, step := range t.cfg.Steps {
		r, err := t.tryStep(ctx, d, step, network, k, host, port, tr)
		if err == nil {
			d := t.clk.Since(start)
			t.m.chain.Observe(d.Seconds())
			t.m.served.WithLabelValues(string(step)).Inc()
			tr.fill(k.host, step, r, d)
			return r, nil
		}
		if errors.Is(err, errSkip) || errors.Is(err, ErrSkippedBroken) {
			// Not configured, or every candidate skipped (recorded in
			// tr.Skipped and retried below): not a failure of the step.
			continue
		}
		last = err
		kind := outcome.ClassifyError(err)
		tr.fail(Failure{Step: step, Target: k.host, Kind: kind, Err: err})
		t.m.fail(step, kind)
		if ctx.Err() != nil {
			break
		}
	}
	// Nodes skipped because every protocol was remembered broken get one
	// last chance: the memory is a hint, not a verdict.
	d.final = true
	for _, sk := range d.skipped {
		if ctx.Err() != nil {
			break
		}
		r, err := t.connect(ctx, d, sk.step, network, k, sk.c, tr)
		if err == nil {
			dur := t.clk.Since(start)
			t.m.chain.Observe(dur.Seconds())
			t.m.served.WithLabelValues(string(sk.step)).Inc()
			tr.fill(k.host, sk.step, r, dur)
			return r, nil
		}
		last = err
	}
	if last == nil {
		last = outcome.Wrap(outcome.NetworkOther, errors.New("no route step configured"))
	}
	return nil, fmt.Errorf("%w: %s: %w", ErrNoRoute, k.host, last)
}

// discovery is the state of one chain run.
type discovery struct {
	final   bool // retrying skipped nodes: skip nothing
	skipped []skippedCandidate
}

type skippedCandidate struct {
	step Step
	c    candidate
}

// ErrSkippedBroken is the reason recorded in Trace.Skipped for a node skipped because every
// protocol to it is remembered broken on this network; such nodes are
// retried after every other step failed.
var ErrSkippedBroken = errors.New("lastmile: node skipped: every protocol remembered broken")

func (t *Transport) defaultPort(k routeKey) int {
	if !k.tls {
		return 80
	}
	return t.cfg.Port
}

// errSkip marks a step without configuration.
var errSkip = errors.New("lastmile: step not configured")

// tryStep produces the step's candidates lazily and races to each in order.
func (t *Transport) tryStep(ctx context.Context, d *discovery, step Step, network uint64, k routeKey, host, port string, tr *Trace) (*route, error) {
	var last error
	try := func(cands []candidate) *route {
		for _, c := range cands {
			r, err := t.connect(ctx, d, step, network, k, c, tr)
			if err == nil {
				return r
			}
			if last == nil || !errors.Is(err, ErrSkippedBroken) {
				last = err // a skip only stands for the step when all were skipped
			}
			if ctx.Err() != nil {
				return nil
			}
		}
		return nil
	}
	switch step {
	case StepScheduler:
		if t.sched == nil {
			return nil, errSkip
		}
		nodes, err := t.sched.nodes(ctx, network, host, tr)
		if err != nil {
			return nil, err
		}
		cands := make([]candidate, 0, len(nodes))
		for _, n := range nodes {
			sni := n.ServerName
			if sni == "" {
				sni = host
			}
			cands = append(cands, candidate{addr: n.Addr, serverName: sni, noH3: !n.offers("h3")})
		}
		if r := try(cands); r != nil {
			return r, nil
		}
	case StepDirect:
		ips, rs, err := t.res.Resolve(ctx, host)
		if err != nil {
			return nil, err
		}
		cands := make([]candidate, 0, len(ips))
		for _, ip := range ips {
			cands = append(cands, candidate{addr: net.JoinHostPort(ip.String(), port), serverName: host, resolver: rs})
		}
		if r := try(cands); r != nil {
			return r, nil
		}
	case StepCDN:
		if len(t.cfg.CDN) == 0 {
			return nil, errSkip
		}
		for _, d := range t.cfg.CDN {
			ips, rs, err := t.res.Resolve(ctx, d.Domain)
			if err != nil {
				last = err
				continue
			}
			p := strconv.Itoa(orInt(d.Port, t.cfg.Port))
			sni := d.ServerName
			if sni == "" {
				sni = d.Domain
			}
			cands := make([]candidate, 0, len(ips))
			for _, ip := range ips {
				cands = append(cands, candidate{addr: net.JoinHostPort(ip.String(), p), serverName: sni, resolver: rs})
			}
			if r := try(cands); r != nil {
				return r, nil
			}
			if ctx.Err() != nil {
				break
			}
		}
	case StepFallbackIP:
		if len(t.cfg.FallbackIPs) == 0 {
			return nil, errSkip
		}
		cands := make([]candidate, 0, len(t.cfg.FallbackIPs))
		for _, f := range t.cfg.FallbackIPs {
			ap, _ := parseAddrPort(f.Addr, uint16(t.cfg.Port)) // validated
			sni := f.ServerName
			if sni == "" {
				sni = host
			}
			cands = append(cands, candidate{addr: ap.String(), serverName: sni})
		}
		if r := try(cands); r != nil {
			return r, nil
		}
	default:
		return nil, errSkip
	}
	if last == nil {
		last = outcome.Wrap(outcome.NetworkOther, errors.New("no candidate"))
	}
	return nil, last
}

// connect races to one candidate and installs the route on success.
func (t *Transport) connect(ctx context.Context, d *discovery, step Step, network uint64, k routeKey, c candidate, tr *Trace) (*route, error) {
	o := raceOpts{plain: !k.tls, noH3: c.noH3}
	if !d.final && t.racer.nodeBroken(network, c.addr, o) {
		d.skipped = append(d.skipped, skippedCandidate{step, c})
		tr.skip(Skip{Step: step, Target: c.addr, Reason: ErrSkippedBroken})
		return nil, outcome.Wrap(outcome.NetworkOther, ErrSkippedBroken)
	}
	conn, err := t.racer.race(ctx, network, c.addr, c.serverName, o, tr)
	if err != nil {
		return nil, err
	}
	nk := nodeKey{addr: c.addr, sni: c.serverName, step: conn.step, tls: k.tls}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || t.network.Load() != network {
		conn.close()
		return nil, outcome.Wrap(outcome.ClientCanceled, errors.New("lastmile: transport closed or network changed during discovery"))
	}
	n, ok := t.nodes[nk]
	if ok {
		n.adopt(conn)
	} else {
		n = newNodeRT(t.racer, conn, c.addr, c.serverName, k.tls)
		t.nodes[nk] = n
	}
	r := &route{step: step, resolver: c.resolver, addr: c.addr, serverName: c.serverName, proto: conn.proto, network: network, rt: n}
	t.setRoute(k, r)
	return r, nil
}

// fill records the route that serves a request.
func (tr *Trace) fill(host string, served Step, r *route, chain time.Duration) {
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
