package lastmile

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/outcome"
	"github.com/veerhq/veer/routing/schedule"
)

// Resolver is the resolver chain: it tries each configured step in order
// until one answers with addresses inside the expected ranges, caches the
// answer for its TTL and serves it stale (RFC 8767) when every step fails.
//
// Contract: Resolve is safe for concurrent use and returns at the latest when
// ctx ends or every step's DNSConfig.Timeout passed. A fresh cached answer is
// returned without any network I/O.
//
// Failure mode: when every step fails and nothing usable is cached, the error
// wraps the last step's error and classifies (outcome.ClassifyError) as that
// step's kind.
type Resolver struct {
	cfg       DNSConfig
	clk       clock.Clock
	log       *slog.Logger
	sys       *net.Resolver
	doh       *http.Client
	cache     *dnsCache
	servers   []string
	bootstrap map[string][]netip.Addr
	expected  map[string][]netip.Prefix
	m         *metrics

	mu      sync.Mutex
	bg      context.Context // lookups' context: canceled by Close
	stopBG  context.CancelFunc
	lookups sync.WaitGroup
	flights map[string]*dnsFlight
	dead    map[deadKey]time.Time
}

// NewResolver returns the resolver chain for cfg. It loads cfg.CacheFile if
// set (a corrupt file is logged and ignored).
func NewResolver(cfg DNSConfig, opts Options) (*Resolver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return newResolver(Config{DNS: cfg}.withDefaults().DNS, opts, newMetrics(opts.Registerer)), nil
}

func newResolver(cfg DNSConfig, opts Options, m *metrics) *Resolver {
	r := &Resolver{
		cfg:       cfg,
		clk:       clock.Or(opts.Clock),
		log:       obs.LoggerOr(opts.Logger),
		sys:       opts.SystemResolver,
		doh:       opts.DoHClient,
		bootstrap: map[string][]netip.Addr{},
		expected:  map[string][]netip.Prefix{},
		m:         m,
		flights:   map[string]*dnsFlight{},
		dead:      map[deadKey]time.Time{},
	}
	r.bg, r.stopBG = context.WithCancel(context.Background())
	if r.sys == nil {
		r.sys = net.DefaultResolver
	}
	if r.doh == nil && cfg.DoHURL != "" {
		r.doh = &http.Client{Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: opts.RootCAs},
			ForceAttemptHTTP2: true,
		}}
	}
	for _, s := range cfg.PrivateServers {
		ap, _ := parseAddrPort(s, 53) // validated
		r.servers = append(r.servers, ap.String())
	}
	for name, ips := range cfg.Bootstrap {
		for _, ip := range ips {
			a, _ := netip.ParseAddr(ip)
			r.bootstrap[dns.CanonicalName(name)] = append(r.bootstrap[dns.CanonicalName(name)], a)
		}
	}
	for name, cidrs := range cfg.Expected {
		for _, c := range cidrs {
			p, _ := netip.ParsePrefix(c)
			r.expected[dns.CanonicalName(name)] = append(r.expected[dns.CanonicalName(name)], p.Masked())
		}
	}
	r.cache = newDNSCache(cfg.CacheFile, cfg.MaxEntries, r.clk.Now(), r.log)
	return r
}

// Flush waits for the lookups still running in the background (a stale
// answer was served while they go on) and until every cached answer so far
// is persisted to DNSConfig.CacheFile. Persistence runs in the background,
// off the request path; call Flush (or Close) before the process exits.
func (r *Resolver) Flush() {
	r.lookups.Wait()
	r.cache.flush()
}

// Close cancels the lookups running in the background and flushes the cache
// file. The Resolver stays usable.
func (r *Resolver) Close() error {
	r.mu.Lock()
	stop := r.stopBG
	r.bg, r.stopBG = context.WithCancel(context.Background())
	r.mu.Unlock()
	stop()
	r.Flush()
	return nil
}

// Resolve returns the addresses of host and the step that produced them.
// An IP literal is returned as is.
func (r *Resolver) Resolve(ctx context.Context, host string) ([]netip.Addr, ResolverStep, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, "", nil
	}
	tr := TraceFrom(ctx)
	name := dns.CanonicalName(host)
	if _, ok := dns.IsDomainName(name); !ok {
		return nil, "", outcome.Wrap(outcome.DNSNotFound, fmt.Errorf("lastmile: bad name %q", host))
	}
	now := r.clk.Now()
	entry, cached, fresh := r.cache.get(name, now)
	if fresh {
		r.answered(tr, StepCache)
		return entry.addrs, StepCache, nil
	}
	staleOK := cached && r.staleUsable(entry, now)
	f := r.lookup(name, staleOK)
	var staleC <-chan time.Time
	if staleOK && r.cfg.StaleAnswerTimeout > 0 {
		// RFC 8767's client response timer: answer from stale data when
		// resolution takes too long; the lookup goes on to refresh the
		// cache.
		tm := r.clk.NewTimer(r.cfg.StaleAnswerTimeout)
		defer tm.Stop()
		staleC = tm.C()
	}
	select {
	case <-f.done:
		tr.add(f.tr.record())
		if f.err == nil {
			r.answered(tr, f.step)
			return f.addrs, f.step, nil
		}
		if staleOK && r.staleUsable(entry, r.clk.Now()) {
			r.answered(tr, StepStale)
			return entry.addrs, StepStale, nil
		}
		return nil, "", fmt.Errorf("lastmile: resolve %s: %w", host, f.err)
	case <-staleC:
		tr.add(f.tr.record())
		r.answered(tr, StepStale)
		return entry.addrs, StepStale, nil
	case <-ctx.Done():
		tr.add(f.tr.record())
		return nil, "", fmt.Errorf("lastmile: resolve %s: %w", host, waitDNSError(ctx))
	}
}

func (r *Resolver) staleUsable(e cacheEntry, now time.Time) bool {
	return r.cfg.MaxStale >= 0 && now.Sub(e.expires) <= r.cfg.MaxStale
}

func (r *Resolver) answered(tr *Trace, s ResolverStep) {
	tr.setResolver(s)
	r.m.answers.WithLabelValues(string(s)).Inc()
}

func (r *Resolver) failed(tr *Trace, s ResolverStep, target string, err error) {
	k := outcome.ClassifyError(err)
	tr.fail(Failure{Resolver: s, Target: target, Kind: k, Err: err})
	r.m.fail(string(s), k)
}

func (r *Resolver) configured(s ResolverStep, name string) bool {
	switch s {
	case StepSystem:
		return true
	case StepPrivateUDP, StepPrivateRace:
		return len(r.servers) > 0
	case StepDoH:
		return r.cfg.DoHURL != ""
	case StepBootstrap:
		return len(r.bootstrap[name]) > 0
	}
	return false
}

func (r *Resolver) clampTTL(ttl time.Duration) time.Duration {
	return min(max(ttl, r.cfg.MinTTL), r.cfg.MaxTTL)
}

func (r *Resolver) try(ctx context.Context, s ResolverStep, name string, skipDead bool) ([]netip.Addr, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	switch s {
	case StepSystem:
		if !r.alive(deadKey{"system", ""}, skipDead) {
			return nil, 0, deadError("system resolver")
		}
		addrs, err := r.sys.LookupNetIP(ctx, "ip", strings.TrimSuffix(name, "."))
		if err != nil {
			err = outcome.Wrap(dnsKind(ctx, err), err)
		}
		r.note(deadKey{"system", ""}, err)
		if err != nil {
			return nil, 0, err
		}
		var out []netip.Addr
		for _, a := range addrs {
			if a = a.Unmap(); schedule.UsableAddr(a) {
				out = append(out, a)
			}
		}
		if len(out) == 0 {
			return nil, 0, outcome.Wrap(outcome.DNSNotFound, ErrNoAddress)
		}
		slices.SortStableFunc(out, v4First)
		return out, r.cfg.SystemTTL, nil
	case StepPrivateUDP:
		return r.eachServer(ctx, name, func(ctx context.Context, server string, q *dns.Msg) (*dns.Msg, error) {
			return r.exchange(ctx, "udp", server, q, skipDead)
		})
	case StepPrivateRace:
		return r.eachServer(ctx, name, func(ctx context.Context, server string, q *dns.Msg) (*dns.Msg, error) {
			return r.raceExchange(ctx, server, q, skipDead)
		})
	case StepDoH:
		k := deadKey{"doh", r.cfg.DoHURL}
		if !r.alive(k, skipDead) {
			return nil, 0, deadError("DoH " + r.cfg.DoHURL)
		}
		addrs, ttl, err := query(ctx, name, func(ctx context.Context, q *dns.Msg) (*dns.Msg, error) {
			return r.dohExchange(ctx, q)
		})
		r.note(k, err)
		return addrs, ttl, err
	case StepBootstrap:
		return r.bootstrap[name], 0, nil
	}
	return nil, 0, outcome.Wrap(outcome.DNSServerFailure, ErrNoResolver)
}

// query asks for A and AAAA concurrently and merges the answers. It fails
// only when neither question produced an address.
func query(ctx context.Context, name string, ex func(context.Context, *dns.Msg) (*dns.Msg, error)) ([]netip.Addr, time.Duration, error) {
	type res struct {
		addrs []netip.Addr
		ttl   uint32
		err   error
	}
	ch := make(chan res, 2)
	for _, t := range []uint16{dns.TypeA, dns.TypeAAAA} {
		go func() {
			q := new(dns.Msg)
			q.SetQuestion(name, t)
			q.RecursionDesired = true
			resp, err := ex(ctx, q)
			if err != nil {
				ch <- res{err: err}
				return
			}
			if resp.Id != q.Id && resp.Id != 0 {
				ch <- res{err: outcome.Wrap(outcome.DNSServerFailure, ErrMismatch)}
				return
			}
			a, ttl, err := parseAnswer(name, resp)
			ch <- res{a, ttl, err}
		}()
	}
	a, b := <-ch, <-ch
	if a.err != nil && b.err != nil {
		// Prefer the more telling error: a server failure or timeout over
		// "no AAAA record".
		if errors.Is(a.err, ErrNoAddress) {
			return nil, 0, b.err
		}
		return nil, 0, a.err
	}
	addrs := append(a.addrs, b.addrs...)
	slices.SortStableFunc(addrs, v4First)
	ttl := a.ttl
	if a.err != nil || (b.err == nil && b.ttl < ttl) {
		ttl = b.ttl
	}
	return addrs, time.Duration(ttl) * time.Second, nil
}

// exchange sends q to server over network ("udp" or "tcp"). A canceled
// ctx ends it at once: miekg/dns reads until its deadline whatever the
// context says, so the connection is closed when ctx is done (the loser of
// raceExchange would otherwise hold its socket and goroutine until the
// step's timeout).
func exchange(ctx context.Context, network, server string, q *dns.Msg) (*dns.Msg, error) {
	c := &dns.Client{Net: network}
	if dl, ok := ctx.Deadline(); ok {
		c.Timeout = time.Until(dl)
	}
	co, err := c.DialContext(ctx, server)
	if err != nil {
		return nil, outcome.Wrap(dnsKind(ctx, err), err)
	}
	defer co.Close()
	stop := context.AfterFunc(ctx, func() { co.Close() })
	defer stop()
	resp, _, err := c.ExchangeWithConnContext(ctx, q, co)
	if err != nil {
		return nil, outcome.Wrap(dnsKind(ctx, err), err)
	}
	if network == "udp" && resp.Truncated {
		return nil, outcome.Wrap(outcome.DNSServerFailure, ErrTruncated)
	}
	return resp, nil
}

func dnsKind(ctx context.Context, err error) outcome.Kind {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil || errors.As(err, &ne) && ne.Timeout() {
		return outcome.DNSTimeout
	}
	if k := outcome.ClassifyError(err); k.DNS() {
		return k
	}
	return outcome.DNSServerFailure
}

// checkExpected reports ErrHijacked when name has expected ranges and an
// address falls outside all of them. Bootstrap addresses are configuration
// and not checked.
func (r *Resolver) checkExpected(s ResolverStep, name string, addrs []netip.Addr) error {
	if s == StepBootstrap || len(r.expected) == 0 {
		return nil
	}
	ranges := r.expectedFor(name)
	if ranges == nil {
		return nil
	}
	for _, a := range addrs {
		ok := false
		for _, p := range ranges {
			if p.Contains(a.Unmap()) {
				ok = true
				break
			}
		}
		if !ok {
			return outcome.Wrap(outcome.DNSServerFailure, fmt.Errorf("%w: %s -> %s", ErrHijacked, name, a))
		}
	}
	return nil
}

// expectedFor returns the ranges of the longest configured suffix of name.
func (r *Resolver) expectedFor(name string) []netip.Prefix {
	for n := name; ; {
		if p, ok := r.expected[n]; ok {
			return p
		}
		i := strings.IndexByte(n, '.')
		if i < 0 || i == len(n)-1 {
			return nil
		}
		n = n[i+1:]
	}
}
