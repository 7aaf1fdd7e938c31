package lastmile

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/veerhq/veer/outcome"
)

// candidate is one address to race to.
type candidate struct {
	addr       string
	serverName string
	resolver   ResolverStep
	noH3       bool // the node does not offer HTTP/3
	h3         bool // the node advertised HTTP/3 (scheduler answer)
}

// discovery is the state of one chain run.
type discovery struct {
	k       routeKey
	network uint64
	host    string // the request's host name, without port
	port    string // its port, or the default
	tr      *Trace
	final   bool // retrying skipped nodes: skip nothing
	skipped []skippedCandidate
}

type skippedCandidate struct {
	step RouteStep
	c    candidate
}

// ErrSkippedBroken is the reason recorded in Trace.Skipped for a node
// skipped because every protocol to it is remembered broken on this
// network; such nodes are retried after every other step failed.
var ErrSkippedBroken = errors.New("lastmile: node skipped: every protocol remembered broken")

// errSkip marks a step without configuration.
var errSkip = errors.New("lastmile: step not configured")

// stepFunc finds a route through one route step: it produces the step's
// candidates (lazily: a CDN domain is resolved only when the one before
// failed) and races them with d.try.
type stepFunc func(t *Transport, ctx context.Context, d *discovery) (*route, error)

// routeSteps maps each route step to its candidate function.
var routeSteps = map[RouteStep]stepFunc{
	StepScheduler:  (*Transport).schedulerStep,
	StepDirect:     (*Transport).directStep,
	StepCDN:        (*Transport).cdnStep,
	StepFallbackIP: (*Transport).fallbackStep,
}

// chain runs the route chain for k, recording into tr. ctx is the run's
// own context (see flight.go), not a caller's.
func (t *Transport) chain(ctx context.Context, k routeKey, tr *Trace) (*route, error) {
	start := t.clk.Now()
	d := &discovery{k: k, network: t.network.Load(), tr: tr}
	d.host, d.port = splitHostPort(k.host, t.defaultPort(k))
	served := func(step RouteStep, r *route) (*route, error) {
		t.install(d, r)
		dur := t.clk.Since(start)
		t.m.chain.Observe(dur.Seconds())
		t.m.served.WithLabelValues(string(step)).Inc()
		tr.fill(k.host, step, r, dur)
		return r, nil
	}
	r, last := t.runSteps(ctx, d)
	if last == nil {
		return served(r.step, r)
	}
	if isSkip(last) {
		last = nil
	}
	// Nodes skipped because every protocol was remembered broken get one
	// last chance: the memory is a hint, not a verdict.
	d.final = true
	for _, sk := range d.skipped {
		if ctx.Err() != nil {
			break
		}
		r, err := t.connect(ctx, d, sk.step, sk.c)
		if err == nil {
			return served(sk.step, r)
		}
		last = err
	}
	if last == nil {
		last = outcome.Wrap(outcome.NetworkOther, errors.New("no route step configured"))
	}
	return nil, fmt.Errorf("%w: %s: %w", ErrNoRoute, k.host, last)
}

func (t *Transport) defaultPort(k routeKey) int {
	if !k.tls {
		return 80
	}
	return t.cfg.Port
}

// schedulerStep: the access nodes the scheduling service returns, in its
// order.
func (t *Transport) schedulerStep(ctx context.Context, d *discovery) (*route, error) {
	if t.sched == nil {
		return nil, errSkip
	}
	nodes, err := t.sched.nodes(ctx, d.network, d.host, d.tr)
	if err != nil {
		return nil, err
	}
	cands := make([]candidate, 0, len(nodes))
	for _, n := range nodes {
		sni := n.ServerName
		if sni == "" {
			sni = d.host
		}
		cands = append(cands, candidate{addr: n.Addr, serverName: sni, noH3: !n.Offers("h3"), h3: n.Offers("h3")})
	}
	return t.try(ctx, d, StepScheduler, cands)
}

// directStep: the request's host through the resolver chain.
func (t *Transport) directStep(ctx context.Context, d *discovery) (*route, error) {
	ips, rs, err := t.res.Resolve(ctx, d.host)
	if err != nil {
		return nil, err
	}
	return t.try(ctx, d, StepDirect, addrCandidates(ips, d.port, d.host, rs))
}

// cdnStep: each CDN vendor domain in order, each resolved when the one
// before failed.
func (t *Transport) cdnStep(ctx context.Context, d *discovery) (*route, error) {
	if len(t.cfg.CDN) == 0 {
		return nil, errSkip
	}
	var last error
	for _, c := range t.cfg.CDN {
		ips, rs, err := t.res.Resolve(ctx, c.Domain)
		if err == nil {
			sni := c.ServerName
			if sni == "" {
				sni = c.Domain
			}
			var r *route
			r, err = t.try(ctx, d, StepCDN, addrCandidates(ips, strconv.Itoa(cmp.Or(c.Port, t.cfg.Port)), sni, rs))
			if err == nil {
				return r, nil
			}
		}
		if last == nil || !errors.Is(err, ErrSkippedBroken) {
			last = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, last
}

// fallbackStep: the configured load-balancer addresses, without DNS.
func (t *Transport) fallbackStep(ctx context.Context, d *discovery) (*route, error) {
	if len(t.cfg.FallbackIPs) == 0 {
		return nil, errSkip
	}
	cands := make([]candidate, 0, len(t.cfg.FallbackIPs))
	for _, f := range t.cfg.FallbackIPs {
		ap, _ := parseAddrPort(f.Addr, uint16(t.cfg.Port)) // validated
		sni := f.ServerName
		if sni == "" {
			sni = d.host
		}
		cands = append(cands, candidate{addr: ap.String(), serverName: sni})
	}
	return t.try(ctx, d, StepFallbackIP, cands)
}

func addrCandidates(ips []netip.Addr, port, sni string, rs ResolverStep) []candidate {
	cands := make([]candidate, 0, len(ips))
	for _, ip := range ips {
		cands = append(cands, candidate{addr: net.JoinHostPort(ip.String(), port), serverName: sni, resolver: rs})
	}
	return cands
}

// try races to the step's candidates in order, staggered (Config.Stagger):
// the next node starts when the one before failed or had no route after
// the stagger. Nodes remembered broken on every protocol are skipped (and
// retried by the chain's last pass); when all were, the error wraps
// ErrSkippedBroken.
func (t *Transport) try(ctx context.Context, d *discovery, step RouteStep, cands []candidate) (*route, error) {
	live := cands[:0:0]
	for _, c := range cands {
		if !d.final && t.racer.nodeBroken(d.network, c.addr, raceOpts{plain: !d.k.tls, noH3: c.noH3, h3: c.h3}) {
			d.skipped = append(d.skipped, skippedCandidate{step, c})
			d.tr.skip(Skip{Route: step, Target: c.addr, Reason: ErrSkippedBroken})
			continue
		}
		live = append(live, c)
	}
	if len(live) == 0 {
		if len(cands) == 0 {
			return nil, outcome.Wrap(outcome.NetworkOther, errors.New("no candidate"))
		}
		return nil, outcome.Wrap(outcome.NetworkOther, ErrSkippedBroken)
	}
	return staggered(ctx, t.clk, len(live), func(int) time.Duration { return t.cfg.Stagger },
		func(ctx context.Context, i int) (*route, error) { return t.connect(ctx, d, step, live[i]) },
		func(int, error) {})
}

// connect races to one candidate and installs the route on success.
func (t *Transport) connect(ctx context.Context, d *discovery, step RouteStep, c candidate) (*route, error) {
	o := raceOpts{plain: !d.k.tls, noH3: c.noH3, h3: c.h3}
	conn, err := t.racer.race(ctx, d.network, c.addr, c.serverName, o, d.tr)
	if err != nil {
		return nil, err
	}
	nk := nodeKey{addr: c.addr, sni: c.serverName, proto: conn.step, tls: d.k.tls}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || t.network.Load() != d.network {
		conn.close()
		return nil, outcome.Wrap(outcome.ClientCanceled, errors.New("lastmile: transport closed or network changed during discovery"))
	}
	n, ok := t.nodes[nk]
	if ok {
		n.adopt(conn)
	} else {
		n = newNodeRT(t.racer, conn, c.addr, c.serverName, d.k.tls)
		t.nodes[nk] = n
	}
	return &route{step: step, resolver: c.resolver, addr: c.addr, serverName: c.serverName, proto: conn.proto, network: d.network, rt: n}, nil
}

// install makes r the working route of the run's host, unless the
// Transport closed or the network changed meanwhile.
func (t *Transport) install(d *discovery, r *route) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.closed && t.network.Load() == d.network {
		t.setRoute(d.k, r)
	}
}
