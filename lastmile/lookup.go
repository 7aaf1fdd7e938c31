package lastmile

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/miekg/dns"
	"github.com/veerhq/veer/outcome"
)

// A lookup of a name runs the resolver chain once for every Resolve that
// needs it meanwhile (single flight), on the Resolver's own context: a
// caller that stops waiting (its deadline, or the stale-answer timer that
// answers it from the cache) leaves the lookup running, so that its answer
// refreshes the cache for the next request (RFC 8767 section 5).
//
// A server that timed out is remembered dead for DNSConfig.DeadServerHold,
// per transport ("udp", "tcp", the system resolver, the DoH URL): the same
// chain run does not ask it again over that transport (private_race after
// private_udp asks a server whose UDP timed out over TCP only), nor do the
// runs that follow. A dead mark is a hint: when every candidate was skipped
// and no stale answer exists, the chain runs once more asking them all.

// dnsFlight is one lookup and its result, published by closing done.
type dnsFlight struct {
	done  chan struct{}
	tr    *Trace
	addrs []netip.Addr
	step  ResolverStep
	err   error
}

// deadKey names one resolver over one transport: via is "system", "udp",
// "tcp" or "doh".
type deadKey struct{ via, target string }

// ErrDeadResolver: the resolver (a server over one transport) timed out
// recently and was not asked again.
var ErrDeadResolver = errors.New("lastmile: resolver remembered dead (timed out recently)")

// errStalePreferred ends a lookup at the bootstrap step when a stale answer
// exists: stale data from a real answer beats hard-coded addresses.
var errStalePreferred = errors.New("lastmile: stale answer preferred over bootstrap addresses")

func deadError(what string) error {
	return outcome.Wrap(outcome.DNSTimeout, fmt.Errorf("%w: %s", ErrDeadResolver, what))
}

// lookup returns the flight resolving name, starting one if none runs.
func (r *Resolver) lookup(name string, staleOK bool) *dnsFlight {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f := r.flights[name]; f != nil {
		return f
	}
	f := &dnsFlight{done: make(chan struct{}), tr: &Trace{}}
	r.flights[name] = f
	r.lookups.Add(1)
	go func(ctx context.Context) {
		defer r.lookups.Done()
		f.addrs, f.step, f.err = r.chain(ctx, name, staleOK, f.tr)
		r.mu.Lock()
		delete(r.flights, name)
		r.mu.Unlock()
		close(f.done)
	}(r.bg)
	return f
}

// chain tries each resolver step in order and caches the first answer.
func (r *Resolver) chain(ctx context.Context, name string, staleOK bool, tr *Trace) ([]netip.Addr, ResolverStep, error) {
	var last error
	for pass := range 2 {
		skipped := false
		for _, step := range r.cfg.Order {
			if step == StepBootstrap && staleOK {
				if last == nil {
					last = outcome.Wrap(outcome.DNSServerFailure, errStalePreferred)
				}
				return nil, "", last
			}
			if !r.configured(step, name) {
				continue
			}
			addrs, ttl, err := r.try(ctx, step, name, pass == 0)
			if err == nil {
				err = r.checkExpected(step, name, addrs)
			}
			if errors.Is(err, ErrDeadResolver) {
				skipped = true
				tr.skip(Skip{Resolver: step, Target: name, Reason: err})
				if last == nil {
					last = err
				}
				continue
			}
			if err != nil {
				last = err
				r.failed(tr, step, name, err)
				if ctx.Err() != nil {
					return nil, "", last
				}
				continue
			}
			if step != StepBootstrap {
				r.cache.put(name, addrs, r.clampTTL(ttl), r.clk.Now())
			}
			return addrs, step, nil
		}
		if !skipped || staleOK {
			break
		}
	}
	if last == nil {
		last = outcome.Wrap(outcome.DNSServerFailure, ErrNoResolver)
	}
	return nil, "", last
}

// waitDNSError is the error of a Resolve whose caller stopped waiting.
func waitDNSError(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return outcome.Wrap(outcome.DNSTimeout, ctx.Err())
	}
	return outcome.Wrap(outcome.ClientCanceled, context.Cause(ctx))
}

// alive reports whether k may be asked: always when !skipDead, otherwise
// unless it timed out within DeadServerHold.
func (r *Resolver) alive(k deadKey, skipDead bool) bool {
	if !skipDead || r.cfg.DeadServerHold < 0 {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	until, ok := r.dead[k]
	return !ok || !r.clk.Now().Before(until)
}

// note records the result of asking k: a timeout marks it dead, an answer
// (even an error response: the server is alive) clears the mark.
func (r *Resolver) note(k deadKey, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case err == nil || outcome.ClassifyError(err) != outcome.DNSTimeout:
		delete(r.dead, k)
	case r.bg.Err() == nil && r.cfg.DeadServerHold > 0 && !errors.Is(err, ErrDeadResolver):
		r.dead[k] = r.clk.Now().Add(r.cfg.DeadServerHold)
	}
}

// forgetDead drops every dead mark (a new network reaches other servers).
func (r *Resolver) forgetDead() {
	r.mu.Lock()
	clear(r.dead)
	r.mu.Unlock()
}

type exchangeFunc func(ctx context.Context, server string, q *dns.Msg) (*dns.Msg, error)

func (r *Resolver) eachServer(ctx context.Context, name string, ex exchangeFunc) ([]netip.Addr, time.Duration, error) {
	var last error
	for _, s := range r.servers {
		addrs, ttl, err := query(ctx, name, func(ctx context.Context, q *dns.Msg) (*dns.Msg, error) {
			return ex(ctx, s, q)
		})
		if err == nil {
			return addrs, ttl, nil
		}
		if last == nil || !errors.Is(err, ErrDeadResolver) {
			last = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, 0, last
}

// exchange sends q to server over network unless that is remembered dead.
func (r *Resolver) exchange(ctx context.Context, network, server string, q *dns.Msg, skipDead bool) (*dns.Msg, error) {
	k := deadKey{network, server}
	if !r.alive(k, skipDead) {
		return nil, deadError(server + " over " + network)
	}
	m, err := exchange(ctx, network, server, q)
	r.note(k, err)
	return m, err
}

// raceExchange sends q over UDP and TCP at once (each unless remembered
// dead) and returns the first usable answer (a truncated UDP answer is not
// usable).
func (r *Resolver) raceExchange(ctx context.Context, server string, q *dns.Msg, skipDead bool) (*dns.Msg, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type res struct {
		m   *dns.Msg
		err error
	}
	ch := make(chan res, 2)
	for _, network := range []string{"udp", "tcp"} {
		go func() {
			m, err := r.exchange(ctx, network, server, q.Copy(), skipDead)
			if err == nil && m.Rcode == dns.RcodeServerFailure {
				err = outcome.Wrap(outcome.DNSServerFailure, fmt.Errorf("%w: SERVFAIL over %s", ErrRcode, network))
			}
			ch <- res{m, err}
		}()
	}
	first := <-ch
	if first.err == nil {
		return first.m, nil
	}
	second := <-ch
	if second.err == nil {
		return second.m, nil
	}
	if errors.Is(first.err, ErrDeadResolver) {
		return nil, second.err
	}
	return nil, first.err
}
