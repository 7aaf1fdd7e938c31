package failover

import (
	"context"
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
// The response headers are classified when they arrive; an error while the
// caller reads the body (a connection reset mid-body, a timeout) is
// classified when it happens and reported as a failure of that request.
// Responses a veer gateway marked as "nothing behind me can serve" (a 5xx
// whose Veer-Outcome header names a network kind or upstream_unavailable:
// outcome.UpstreamUnavailable) count as failures of the domain, as do
// responses whose status is in Config.FailureStatuses; a shed 503, a 429
// and an application's own 5xx do not.
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
	// warnedPath[i]: the misconfigured canary path was logged for domain i.
	warnedPath []atomic.Bool
	closed     bool
	pseq       uint64     // sequence of persistence decisions
	pending    persistJob // the decision of the current policy call
	ctx        context.Context
	cancel     context.CancelFunc
	wg         sync.WaitGroup // canaries, timer callbacks and store writes

	network string    // the last SetNetwork
	histGen uint64    // the policy's history generation last taken for the store
	fail    statusSet // Config.FailureStatuses

	pmu        sync.Mutex // serialises Store writes
	persisted  uint64     // pseq of the last domain decision written
	hpersisted uint64     // pseq of the last history written
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
	policy, err := NewPolicy(cfg)
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
	t.fail = newStatusSet(cfg.FailureStatuses)
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
	t.warnedPath = make([]atomic.Bool, len(t.hosts))
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

	restored, hist := t.restore()
	if r, ok := policy.(NetworkAware); ok && len(hist) > 0 {
		r.Remember(hist)
	}
	t.m.setState(Primary)
	t.step(func(now time.Time) Action { return policy.Start(now, restored) })
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

// RecoveryAt returns, in BACKUP, when the policy's recovery timer fires
// (the next canary to the primary), so that an observer can wait for the
// announced return rather than guess; zero in other states and for
// policies without a recovery timer (the baselines).
func (t *Transport) RecoveryAt() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r, ok := t.policy.(interface{ RecoveryAt() time.Time }); ok && t.policy.State() == Backup {
		return r.RecoveryAt()
	}
	return time.Time{}
}

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
	if err == nil && !s.reportSuccess && !t.fail.has(resp.StatusCode) && (resp.StatusCode < 500 || resp.Header.Get(outcome.HeaderOutcome) == "") {
		// Steady state: a response changes nothing, but its body may
		// still fail.
		return t.watchBody(resp, s.domain, false, outcome.Outcome{}), err
	}
	now := t.clk.Now()
	o := outcome.ClassifyAt(resp, err, now)
	switch {
	case o.Kind == outcome.ClientCanceled:
		return resp, err
	case t.fail.failure(o):
		t.step(func(time.Time) Action { return t.policy.Report(now, s.domain, o) })
		return resp, err // a failure already: nothing more to learn from the body
	case !s.reportSuccess:
		return t.watchBody(resp, s.domain, false, o), err
	}
	// A success that may change the state: it counts when the body has
	// been read (or closed by the caller); a body that fails is a failure.
	if w := t.watchBody(resp, s.domain, true, o); w != nil {
		if _, ok := w.Body.(*watchedBody); ok {
			return w, err
		}
	}
	t.step(func(time.Time) Action { return t.policy.Report(now, s.domain, o) })
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
func (t *Transport) applyLocked(now time.Time, a Action, from int, notify func(time.Time)) {
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
	t.rememberLocked()
	if a.Canary != None && a.Canary < len(t.hosts) {
		t.sendCanaryLocked(a.Canary)
	}
	t.armLocked(a.Wake)
	// The callbacks come last, when the snapshot, canary and timer are in
	// place: whatever their receiver does next (advance a manual clock,
	// send requests) sees the Transport in its new state.
	if notify != nil {
		notify(now)
	}
	if tr.Changed() && t.cfg.OnTransition != nil {
		t.cfg.OnTransition(Event{At: now, From: tr.From, To: tr.To, Reason: tr.Reason, FromDomain: t.hosts[from], Domain: t.hosts[tr.Domain]})
	}
}

// transitionLocked counts and logs a transition and takes the persistence
// decision it implies.
func (t *Transport) transitionLocked(tr Transition, from int) {
	t.m.transition(tr)
	t.log.Info("failover: transition", "from", tr.From.String(), "to", tr.To.String(),
		"reason", tr.Reason.String(), "from_domain", t.hosts[from], "domain", t.hosts[tr.Domain])
	t.persistTransitionLocked(tr, from)
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
	t.step(func(now time.Time) Action {
		if t.wakeAt.IsZero() {
			return keep
		}
		if now.Before(t.wakeAt) { // a stale firing: wait for the rest
			t.timer.Reset(t.wakeAt.Sub(now))
			return keep
		}
		t.wakeAt = time.Time{}
		return t.policy.Tick(now)
	})
}

// step is the one place where the policy is called: with the lock held (and
// nothing done once the Transport is closed), call returns the policy's
// Action at the given time; step applies it, then writes the persistence
// decision it implies after releasing the lock. An Action of keep leaves the
// wake-up timer as it is.
func (t *Transport) step(call func(now time.Time) Action) { t.stepNotify(call, nil) }

// stepNotify is step with a callback run just before OnTransition.
func (t *Transport) stepNotify(call func(now time.Time) Action, notify func(now time.Time)) {
	t.mu.Lock()
	if !t.closed {
		now := t.clk.Now()
		from := t.policy.Domain()
		a := call(now)
		if a != keep {
			t.applyLocked(now, a, from, notify)
		}
	}
	job := t.persistJobLocked()
	t.mu.Unlock()
	t.persist(job)
}

// keep is a sentinel Action telling step to leave everything, the timer
// included, as it is.
var keep = Action{Canary: -2}
