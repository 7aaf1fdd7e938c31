package failover

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/outcome"
)

// CanaryHeader marks canary requests ("Veer-Canary: 1") so that servers
// and logs can tell them from app traffic.
const CanaryHeader = "Veer-Canary"

// Transport is an http.RoundTripper that applies a failover Policy to the
// requests it carries. Each request addressed to the configured primary
// (same host name; same port too when Primary names one) is rewritten to the domain the policy picks (URL host and Host header, so
// the TLS server name follows; the request's scheme and port are kept
// unless the picked domain names its own port), sent through the wrapped
// round tripper, classified with outcome.Classify and reported to the
// policy. Requests to other hosts, and requests whose context carries
// WithoutFailover, pass through untouched.
//
// The request path reads the current domain from an immutable snapshot
// behind an atomic pointer: no lock, goroutine or timer per request. A
// success that cannot change the policy's state (the steady PRIMARY case)
// is not reported at all; failures and the successes that end a failure
// streak take the Transport's lock. Canaries run on their own goroutines,
// one in flight per domain, and the policy's wake-ups run on one timer of
// Config.Clock.
//
// Only the response headers are classified: an error while reading the
// body later is not seen by the policy.
type Transport struct {
	next    http.RoundTripper
	ownNext *http.Transport // the default next, closed by Close
	clk     clock.Clock
	log     *slog.Logger
	cfg     Config
	m       *metrics

	hosts       []string // configured domains; 0 is the primary
	hasPort     []bool
	primaryName string // the primary's host without port
	primaryPort string // the primary's port, or ""

	snap   atomic.Pointer[snapshot]
	snaps  []snapshot // every (domain, state, reportSuccess) snapshot, prebuilt
	ports  atomic.Pointer[portHosts]
	scheme atomic.Uint32 // scheme of the last regular request (schemeHTTP/S)

	mu       sync.Mutex // serialises the policy and everything below
	policy   Policy
	quiet    quietPolicy // policy, when it can tell a success is a no-op
	timer    clock.Timer
	wakeAt   time.Time
	inflight []bool // a canary to domain i is in flight
	closed   bool
	pseq     uint64     // sequence of persistence decisions
	pending  persistJob // the decision of the current policy call
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup // canaries, timer callbacks and store writes

	pmu       sync.Mutex // serialises Store writes
	persisted uint64     // pseq of the last decision written
}

var _ http.RoundTripper = (*Transport)(nil)

// snapshot is what the request path reads.
type snapshot struct {
	domain        int
	state         State
	reportSuccess bool // a success must be reported (it may change state)
}

// portHosts caches the domains joined with the port of the regular traffic,
// keyed by the URL host (and scheme) of the last request to the primary.
type portHosts struct {
	reqHost   string
	reqScheme string
	port      string
	hosts     []string
}

const (
	schemeHTTPS = iota // the default
	schemeHTTP
)

// NewTransport returns a Transport applying the policy cfg.Policy (default
// "uber") over next. A nil next is a clone of http.DefaultTransport with a
// 5s dial timeout, a 5s TLS handshake timeout and 16 idle connections per
// host; any other RoundTripper (an HTTP/3 one, say) works as well.
//
// If cfg.Store holds a backup domain from a previous run, the Transport
// starts in BACKUP on it (the recovery timer then probes the primary as
// usual). An unreadable record is logged and ignored; a corrupt one, or one
// naming a domain that is no configured backup, is also cleared.
func NewTransport(cfg Config, next http.RoundTripper) (*Transport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	var policy Policy
	var err error
	switch cfg.Policy {
	case PolicyRoundRobin:
		policy, err = NewRoundRobin(cfg)
	case PolicyThreshold:
		policy, err = NewThreshold(cfg)
	default:
		policy, err = NewUber(cfg)
	}
	if err != nil {
		return nil, err
	}
	t := &Transport{
		next:   next,
		clk:    clock.Or(cfg.Clock),
		log:    obs.LoggerOr(cfg.Logger),
		cfg:    cfg,
		policy: policy,
	}
	t.quiet, _ = policy.(quietPolicy)
	if t.next == nil {
		t.ownNext = defaultNext()
		t.next = t.ownNext
	}
	t.hosts = append([]string{cfg.Primary}, cfg.Backups...)
	t.hasPort = make([]bool, len(t.hosts))
	for i, h := range t.hosts {
		t.hasPort[i] = strings.Contains(h, ":")
	}
	pu := &url.URL{Host: cfg.Primary}
	t.primaryName, t.primaryPort = pu.Hostname(), pu.Port()
	t.inflight = make([]bool, len(t.hosts))
	t.snaps = make([]snapshot, len(t.hosts)*4*2)
	for d := range t.hosts {
		for s := range 4 {
			for r := range 2 {
				t.snaps[snapIndex(d, State(s), r == 1)] = snapshot{domain: d, state: State(s), reportSuccess: r == 1}
			}
		}
	}
	t.ports.Store(&portHosts{reqHost: "\x00", hosts: t.hosts}) // matches no request
	t.m = newMetrics(cfg.Registerer, len(t.hosts))
	t.ctx, t.cancel = context.WithCancel(context.Background())

	restored := None
	if cfg.Store != nil {
		saved, err := cfg.Store.Load()
		stale := false
		switch {
		case err != nil:
			t.log.Warn("failover: ignoring unreadable store", "err", err)
			stale = errors.Is(err, ErrCorruptStore)
		case saved != "":
			for i, b := range cfg.Backups {
				if strings.EqualFold(b, saved) {
					restored = i + 1
				}
			}
			if restored == None {
				t.log.Warn("failover: ignoring saved domain that is not a configured backup", "domain", saved)
				stale = true
			}
		}
		if stale { // remove it, so that the warning is not repeated at every start
			if err := cfg.Store.Clear(); err != nil {
				t.log.Warn("failover: cannot clear the store", "err", err)
			}
		}
	}
	t.m.setState(Primary)
	t.mu.Lock()
	now := t.clk.Now()
	a := policy.Start(now, restored)
	t.applyLocked(now, a, PrimaryIndex, nil)
	job := t.persistJobLocked()
	t.mu.Unlock()
	t.persist(job)
	return t, nil
}

func defaultNext() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	tr.DialContext = d.DialContext
	tr.TLSHandshakeTimeout = 5 * time.Second
	tr.MaxIdleConnsPerHost = 16
	return tr
}

func snapIndex(domain int, s State, report bool) int {
	i := (domain*4 + int(s)) * 2
	if report {
		i++
	}
	return i
}

type optOutKey struct{}

// WithoutFailover returns a context whose requests the Transport passes
// through untouched: not rewritten, not reported.
func WithoutFailover(ctx context.Context) context.Context {
	return context.WithValue(ctx, optOutKey{}, true)
}

// State returns the current state.
func (t *Transport) State() State { return t.snap.Load().state }

// Domain returns the domain regular traffic uses now, as configured.
func (t *Transport) Domain() string { return t.hosts[t.snap.Load().domain] }

// rewritten is a request and its URL in one allocation.
type rewritten struct {
	req http.Request
	url url.URL
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL == nil {
		return t.next.RoundTrip(req)
	}
	ph := t.ports.Load()
	// Fast path: the same URL host (and scheme) as the last request that
	// addressed the primary; otherwise parse it.
	if req.URL.Host != ph.reqHost || t.primaryPort != "" && req.URL.Scheme != ph.reqScheme {
		if !t.isPrimary(req.URL) {
			return t.next.RoundTrip(req)
		}
		ph = t.newPorts(req.URL)
	}
	if req.Context().Value(optOutKey{}) != nil {
		return t.next.RoundTrip(req)
	}
	sc := uint32(schemeHTTPS)
	if req.URL.Scheme == "http" {
		sc = schemeHTTP
	}
	if t.scheme.Load() != sc {
		t.scheme.Store(sc)
	}
	s := t.snap.Load()
	host := ph.hosts[s.domain]
	out := req
	if s.domain != PrimaryIndex {
		// Another domain: rewrite a copy (the RoundTripper contract
		// forbids changing req). On primary the request, which addresses
		// the primary already, goes as it is.
		rw := &rewritten{req: *req, url: *req.URL}
		rw.url.Host = host
		rw.req.URL = &rw.url
		rw.req.Host = host
		out = &rw.req
	}
	t.m.requests[s.domain].Inc()
	resp, err := t.next.RoundTrip(out)
	if err == nil && !s.reportSuccess {
		return resp, err // steady state: a response changes nothing
	}
	now := t.clk.Now()
	o := outcome.ClassifyAt(resp, err, now)
	if o.Kind == outcome.ClientCanceled || !o.Kind.Network() && !s.reportSuccess {
		return resp, err
	}
	t.mu.Lock()
	if !t.closed {
		from := t.policy.Domain()
		t.applyLocked(now, t.policy.Report(now, s.domain, o), from, nil)
	}
	job := t.persistJobLocked()
	t.mu.Unlock()
	t.persist(job)
	return resp, err
}

// isPrimary reports whether u addresses the primary: same host name (any
// case) and, when the primary names a port, the same port (an absent port
// is the scheme's default).
func (t *Transport) isPrimary(u *url.URL) bool {
	if !strings.EqualFold(u.Hostname(), t.primaryName) {
		return false
	}
	if t.primaryPort == "" {
		return true
	}
	port := u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	return port == t.primaryPort
}

// newPorts caches the domains for u, a URL addressing the primary.
func (t *Transport) newPorts(u *url.URL) *portHosts {
	port := u.Port()
	ph := &portHosts{reqHost: u.Host, reqScheme: u.Scheme, port: port, hosts: make([]string, len(t.hosts))}
	for i, h := range t.hosts {
		if port == "" || t.hasPort[i] {
			ph.hosts[i] = h
		} else {
			ph.hosts[i] = net.JoinHostPort(h, port)
		}
	}
	t.ports.Store(ph)
	return ph
}

// NetworkChanged tells the policy that the device changed network (Wi-Fi to
// cellular, say): failure streaks restart, FAILOVER returns to PRIMARY and
// BACKUP probes the primary at once. When the wrapped round tripper has a
// NetworkChanged method too (lastmile.Transport does), it is called as well.
func (t *Transport) NetworkChanged() {
	// The wrapped round tripper may keep per-network state of its own (the
	// last-mile chain's working routes, its broken-protocol memory): it
	// forgets the old network first, so that the probe the policy starts
	// below does not go out on the old network's routes.
	if n, ok := t.next.(interface{ NetworkChanged() }); ok {
		n.NetworkChanged()
	}
	t.mu.Lock()
	if !t.closed {
		now := t.clk.Now()
		from := t.policy.Domain()
		t.applyLocked(now, t.policy.NetworkChanged(now), from, nil)
	}
	job := t.persistJobLocked()
	t.mu.Unlock()
	t.persist(job)
}

// CloseIdleConnections closes the wrapped round tripper's idle connections
// when it has that method (http.Client.CloseIdleConnections calls it).
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// Close stops the timer, cancels the canaries in flight and waits for them
// and for pending store writes. Requests still pass through a closed
// Transport (on the domain it had), but nothing is reported any more.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	if t.timer != nil {
		t.timer.Stop()
	}
	t.cancel()
	t.mu.Unlock()
	t.wg.Wait()
	if t.ownNext != nil {
		t.ownNext.CloseIdleConnections()
	}
	return nil
}

// applyLocked carries out a policy Action; from is the traffic domain before
// the call that returned it. notify, if not nil, runs just before the
// OnTransition callback.
func (t *Transport) applyLocked(now time.Time, a Action, from int, notify func()) {
	report := true
	if t.quiet != nil {
		report = !t.quiet.successIsNoop()
	}
	s := &t.snaps[snapIndex(t.policy.Domain(), t.policy.State(), report)]
	if t.snap.Load() != s {
		t.snap.Store(s)
	}
	tr := a.Transition
	if tr.Changed() {
		t.transitionLocked(tr, from)
	}
	if a.Canary != None && a.Canary < len(t.hosts) {
		t.sendCanaryLocked(a.Canary)
	}
	t.armLocked(a.Wake)
	// The callbacks come last, when the snapshot, canary and timer are in
	// place: whatever their receiver does next (advance a manual clock,
	// send requests) sees the Transport in its new state.
	if notify != nil {
		notify()
	}
	if tr.Changed() && t.cfg.OnTransition != nil {
		t.cfg.OnTransition(Event{At: now, From: tr.From, To: tr.To, Reason: tr.Reason, FromDomain: t.hosts[from], Domain: t.hosts[tr.Domain]})
	}
}

// persistence decisions, taken under mu and written after it is released
const (
	persistNone = iota
	persistSave
	persistClear
)

type persistJob struct {
	seq    uint64
	op     int
	domain string
}

// transitionLocked counts and logs a transition and takes the persistence
// decision it implies.
func (t *Transport) transitionLocked(tr Transition, from int) {
	t.m.transition(tr)
	t.log.Info("failover: transition", "from", tr.From.String(), "to", tr.To.String(),
		"reason", tr.Reason.String(), "from_domain", t.hosts[from], "domain", t.hosts[tr.Domain])
	if t.cfg.Store != nil {
		switch {
		case tr.To == Backup && tr.Reason != ReasonRestored && tr.Domain != from:
			t.pseq++
			t.pending = persistJob{seq: t.pseq, op: persistSave, domain: t.hosts[tr.Domain]}
		case tr.Domain == PrimaryIndex && from != PrimaryIndex:
			t.pseq++
			t.pending = persistJob{seq: t.pseq, op: persistClear}
		}
	}
}

// persistJobLocked takes the pending store write, if any, and counts it in
// wg so that Close waits for it.
func (t *Transport) persistJobLocked() persistJob {
	j := t.pending
	t.pending = persistJob{}
	if j.op != persistNone {
		t.wg.Add(1)
	}
	return j
}

// persist writes j unless a later decision was written already.
func (t *Transport) persist(j persistJob) {
	if j.op == persistNone {
		return
	}
	defer t.wg.Done()
	t.pmu.Lock()
	defer t.pmu.Unlock()
	if j.seq <= t.persisted {
		return
	}
	t.persisted = j.seq
	var err error
	if j.op == persistSave {
		err = t.cfg.Store.Save(j.domain)
	} else {
		err = t.cfg.Store.Clear()
	}
	if err != nil {
		t.log.Warn("failover: store write failed", "err", err)
	}
}

// armLocked points the wake-up timer at wake (zero: none).
func (t *Transport) armLocked(wake time.Time) {
	if t.closed {
		return
	}
	if wake.IsZero() {
		t.wakeAt = time.Time{}
		if t.timer != nil {
			t.timer.Stop()
		}
		return
	}
	if wake.Equal(t.wakeAt) {
		return
	}
	t.wakeAt = wake
	d := max(wake.Sub(t.clk.Now()), 0) // now, not when the outcome was taken
	if t.timer == nil {
		t.timer = t.clk.AfterFunc(d, t.onTimer)
		return
	}
	t.timer.Stop()
	t.timer.Reset(d)
}

func (t *Transport) onTimer() {
	t.mu.Lock()
	if t.closed || t.wakeAt.IsZero() {
		t.mu.Unlock()
		return
	}
	now := t.clk.Now()
	if now.Before(t.wakeAt) { // a stale firing: wait for the rest
		t.timer.Reset(t.wakeAt.Sub(now))
		t.mu.Unlock()
		return
	}
	t.wakeAt = time.Time{}
	from := t.policy.Domain()
	t.applyLocked(now, t.policy.Tick(now), from, nil)
	job := t.persistJobLocked()
	t.mu.Unlock()
	t.persist(job)
}

func (t *Transport) sendCanaryLocked(d int) {
	if t.closed || t.inflight[d] {
		return // the result of the canary in flight will answer
	}
	t.inflight[d] = true
	t.wg.Add(1)
	go t.runCanary(d)
}

func (t *Transport) runCanary(d int) {
	defer t.wg.Done()
	o := t.probe(d)
	now := t.clk.Now()
	t.mu.Lock()
	t.inflight[d] = false
	if t.closed {
		t.mu.Unlock()
		return
	}
	t.m.canary(d, o.OK())
	from := t.policy.Domain()
	t.applyLocked(now, t.policy.CanaryDone(now, d, o), from, func() {
		if t.cfg.OnCanary != nil {
			t.cfg.OnCanary(t.hosts[d], Canary{At: now, OK: o.OK(), Kind: o.Kind})
		}
	})
	job := t.persistJobLocked()
	t.mu.Unlock()
	t.persist(job)
}

// probe sends one canary to domain d through the wrapped round tripper and
// classifies its result.
func (t *Transport) probe(d int) outcome.Outcome {
	ctx, cancel := context.WithTimeout(t.ctx, t.cfg.CanaryTimeout)
	defer cancel()
	scheme := "https"
	switch {
	case t.cfg.CanaryScheme != "":
		scheme = t.cfg.CanaryScheme
	case t.scheme.Load() == schemeHTTP:
		scheme = "http"
	}
	host := t.ports.Load().hosts[d]
	u := &url.URL{Scheme: scheme, Host: host, Path: t.cfg.CanaryPath}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return outcome.Outcome{Kind: outcome.NetworkOther, Err: err}
	}
	req.Header.Set(CanaryHeader, "1")
	resp, err := t.next.RoundTrip(req)
	o := outcome.ClassifyAt(resp, err, t.clk.Now())
	if err == nil {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
	}
	return o
}
