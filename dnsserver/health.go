package dnsserver

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/veerhq/veer/clock"
)

// checker runs the access nodes' health checks: every interval, all checks
// at once, each bounded by the timeout; then it publishes the set of checks
// that failed, which the query path reads through an atomic pointer. A node
// is up until its first check says otherwise, and leaves the answers after
// one failed check (so within one interval of dying) and comes back after
// one passed check.
type checker struct {
	clk    clock.Clock
	log    *slog.Logger
	m      *metrics
	client *http.Client
	down   atomic.Pointer[map[string]bool]
	// probes is what the rounds said about each check (Server.NodeHealth).
	probes atomic.Pointer[map[string]probeState]

	mu      sync.Mutex
	cfg     HealthConfig
	checks  []string
	timer   clock.Timer
	closed  bool
	running sync.WaitGroup
	ctx     context.Context
	cancel  context.CancelFunc
	// onRound, if set, is called after each round (tests, logs).
	onRound func(down map[string]bool)
}

func newChecker(clk clock.Clock, log *slog.Logger, m *metrics, onRound func(map[string]bool)) *checker {
	ctx, cancel := context.WithCancel(context.Background())
	return &checker{
		clk: clk, log: log, m: m, onRound: onRound, ctx: ctx, cancel: cancel,
		client: &http.Client{
			Transport:     &http.Transport{DisableKeepAlives: true, Proxy: nil},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
}

// up reports whether the node checked by check is up. The query path calls
// it; it takes no lock.
func (c *checker) up(check string) bool {
	if check == "" {
		return true
	}
	d := c.down.Load()
	return d == nil || !(*d)[check]
}

// set replaces the checks and the timing and starts a round now; checks
// that stay keep their state.
func (c *checker) set(checks []string, cfg HealthConfig) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.cfg, c.checks = cfg, checks
	c.m.nodesAll.Set(float64(len(checks)))
	if c.timer != nil {
		c.timer.Stop()
	}
	if len(checks) == 0 {
		c.timer = nil
		c.down.Store(nil)
		c.probes.Store(nil)
		return
	}
	c.timer = c.clk.AfterFunc(0, c.round)
}

// round runs every check once, publishes the result and schedules the next
// round.
func (c *checker) round() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.running.Add(1)
	defer c.running.Done()
	checks, cfg := slices.Clone(c.checks), c.cfg
	c.mu.Unlock()

	errs := make([]error, len(checks))
	var wg sync.WaitGroup
	for i, chk := range checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.probe(chk, cfg.Timeout)
		}()
	}
	wg.Wait()

	now := c.clk.Now()
	down := map[string]bool{}
	probes := make(map[string]probeState, len(checks))
	prev, prevProbes := c.down.Load(), c.probes.Load()
	for i, chk := range checks {
		failed := errs[i] != nil
		if failed {
			down[chk] = true
		}
		was := prev != nil && (*prev)[chk]
		if was != failed {
			c.log.Info("dnsserver: access node health changed", "check", chk, "up", !failed)
		}
		ps, seen := probeState{}, false
		if prevProbes != nil {
			ps, seen = (*prevProbes)[chk]
		}
		if !seen || ps.up == failed {
			ps.since = now
		}
		ps.up, ps.checked, ps.err = !failed, now, ""
		if failed {
			ps.err = errs[i].Error()
		}
		probes[chk] = ps
	}
	c.down.Store(&down)
	c.probes.Store(&probes)
	c.m.nodesUp.Set(float64(len(checks) - len(down)))
	if c.onRound != nil {
		c.onRound(down)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed && slices.Equal(checks, c.checks) {
		c.timer = c.clk.AfterFunc(cfg.Interval, c.round)
	}
}

// probe runs one check: a TCP connect, or an HTTP GET with a 2xx status.
func (c *checker) probe(check string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(c.ctx, timeout)
	defer cancel()
	u, err := url.Parse(check)
	if err != nil {
		return err
	}
	if u.Scheme == "tcp" {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", u.Host)
		if err != nil {
			return err
		}
		return conn.Close()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, check, nil)
	if err != nil {
		return err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &statusError{resp.StatusCode}
	}
	return nil
}

// probeState is the last rounds' word on one check.
type probeState struct {
	up      bool
	since   time.Time // when it entered this state (or its first probe)
	checked time.Time // its last probe
	err     string    // why the last probe failed
}

// state returns check's state; ok false before its first probe.
func (c *checker) state(check string) (probeState, bool) {
	m := c.probes.Load()
	if m == nil {
		return probeState{}, false
	}
	ps, ok := (*m)[check]
	return ps, ok
}

type statusError struct{ code int }

func (e *statusError) Error() string { return "health check: HTTP status " + http.StatusText(e.code) }

// close stops the checks and waits for a round in flight.
func (c *checker) close() {
	c.mu.Lock()
	c.closed = true
	if c.timer != nil {
		c.timer.Stop()
	}
	c.mu.Unlock()
	c.cancel()
	c.running.Wait()
	c.client.CloseIdleConnections()
}
