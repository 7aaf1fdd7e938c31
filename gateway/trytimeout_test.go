package gateway

import (
	"net/http"
	"testing"
	"time"
)

// TestDerivedTryTimeout: step table of the latency tracker. Cold, a route
// gets ColdTryTimeout and no stall threshold; fast answers give the floor;
// slower answers raise it to AutoTryFactor × their p99; a few timeouts (a
// frozen backend) change nothing, but when more than EscalateShare of the
// attempts time out (the route slowed down as a whole) the timeout doubles
// at every refresh; old windows are forgotten.
func TestDerivedTryTimeout(t *testing.T) {
	t0 := time.Unix(1000, 0) // the start of a 10 s window
	l := newLatencyTracker()
	at := t0
	for i, st := range []struct {
		n        int
		d        time.Duration // answered after d; 0: timed out
		min, max time.Duration // want TryTimeout in [min, max]
		stall    bool          // StallAfter > 0
	}{
		{0, time.Millisecond, ColdTryTimeout, ColdTryTimeout, false},
		{99, time.Millisecond, ColdTryTimeout, ColdTryTimeout, false}, // fewer than 100 seen
		{1, time.Millisecond, MinAutoTryTimeout, MinAutoTryTimeout, true},
		{900, time.Millisecond, MinAutoTryTimeout, MinAutoTryTimeout, true},
		{1000, 40 * time.Millisecond, 8 * 40 * time.Millisecond, 8 * 48 * time.Millisecond, true}, // p99 now 40 ms
		{30, 0, 8 * 40 * time.Millisecond, 8 * 48 * time.Millisecond, true},                       // 30 timeouts of 2030: a frozen backend, no change
		{300, 0, 2 * 8 * 40 * time.Millisecond, 2 * 8 * 48 * time.Millisecond, true},              // 330 of 2330 time out: doubled
		{0, 0, 4 * 8 * 40 * time.Millisecond, 4 * 8 * 48 * time.Millisecond, true},                // and again at the next refresh
	} {
		for range st.n {
			if st.d == 0 {
				l.ObserveTimeout(at)
			} else {
				l.Observe(at, st.d)
			}
		}
		at = at.Add(latRefresh) // the next reading recomputes
		got := l.TryTimeout(at, time.Hour)
		if got < st.min || got > st.max {
			t.Fatalf("step %d: TryTimeout %v, want in [%v, %v]", i, got, st.min, st.max)
		}
		if s := l.StallAfter(at.UnixNano()); (s > 0) != st.stall || (s > 0 && s < MinStall) {
			t.Fatalf("step %d: StallAfter %v", i, s)
		}
	}
	if got := l.TryTimeout(at, 5*time.Millisecond); got != 5*time.Millisecond {
		t.Fatalf("ceiling: %v, want the route's remaining 5ms", got)
	}
	// two windows later everything seen is forgotten: cold again
	at = t0.Add(3 * latWindow)
	if got := l.TryTimeout(at, time.Hour); got != ColdTryTimeout {
		t.Fatalf("after 30 s without attempts: %v, want ColdTryTimeout", got)
	}
}

// TestStalledCluster: a cluster whose usable backends all have requests
// outstanding and have answered none for the stall threshold takes no new
// requests (share 0) until one of them answers an attempt, passes a
// health check with nothing outstanding, or the hold passes; the requests that waited on it ending
// without an answer (timed out, their clients gone) do not end the stall.
// Before, a frozen cluster whose waiting requests had ended took new ones
// at once, and trapped new POSTs each client timeout.
func TestStalledCluster(t *testing.T) {
	now := time.Unix(1000, 0)
	c := &cluster{cfg: Cluster{MinHealthyShare: 0.5}, state: &clusterState{}}
	for i := range 2 {
		b := newBackend("c", string(rune('a'+i)), now.Add(-time.Hour))
		c.backends = append(c.backends, b)
		c.cum = append(c.cum, i+1)
		b.lastDone.Store(now.UnixNano())
		b.outstanding.Store(3)
	}
	c.state.upSince.Store(now.Add(-time.Hour).UnixNano())
	after := 50 * time.Millisecond
	at := func(d time.Duration) int64 { return now.Add(d).UnixNano() }
	for i, st := range []struct {
		at    time.Duration
		do    func()
		share float64
	}{
		{10 * time.Millisecond, nil, 1},
		{60 * time.Millisecond, nil, 0}, // neither has answered for 60 ms
		{61 * time.Millisecond, func() { c.backends[0].lastDone.Store(at(61 * time.Millisecond)) }, 1},
		{200 * time.Millisecond, nil, 0},
		// b's waiting requests timed out, none answered: still stalled
		{201 * time.Millisecond, func() { c.backends[1].outstanding.Store(0) }, 0},
		{250 * time.Millisecond, func() { c.backends[1].outstanding.Store(1); c.backends[1].busySince.Store(at(250 * time.Millisecond)) }, 0},
		// a passed health check (or any answer) from b ends its stall
		{260 * time.Millisecond, func() { c.backends[1].lastDone.Store(at(260 * time.Millisecond)) }, 1},
		{311 * time.Millisecond, nil, 0}, // b's request from 250 ms unanswered past 50 ms since
		{312 * time.Millisecond, func() { c.backends[1].outstanding.Store(0) }, 0},
		// nothing answered and nothing outstanding on b: the hold ends
		{311*time.Millisecond + stallHold, nil, 1},
		{400*time.Millisecond + stallHold, nil, 1}, // b idle: a fresh round of requests may go
	} {
		if st.do != nil {
			st.do()
		}
		if got := c.share(at(st.at), after); got != st.share {
			t.Fatalf("step %d at %v: share %v, want %v", i, st.at, got, st.share)
		}
	}
	if got := c.share(at(time.Hour), 0); got != 1 {
		t.Fatalf("no stall threshold yet (cold route): share %v, want 1", got)
	}

	// With health checks the stall holds past stallHold: the checks end it
	// (a pass) or mark the backends down; stallHoldChecked is the net.
	c.cfg.Health.Path = "/health"
	t0 := time.Hour
	for _, b := range c.backends {
		b.stalledAt.Store(0)
		b.outstanding.Store(1)
		b.busySince.Store(at(t0))
		b.lastDone.Store(at(t0))
	}
	for i, st := range []struct {
		at    time.Duration
		do    func()
		share float64
	}{
		{t0 + 60*time.Millisecond, nil, 0},
		{t0 + 61*time.Millisecond, func() {
			for _, b := range c.backends {
				b.outstanding.Store(0)
			}
		}, 0},
		{t0 + 61*time.Millisecond + stallHold, nil, 0},
		{t0 + 60*time.Millisecond + stallHoldChecked, nil, 1},
		{t0 + 61*time.Millisecond + stallHoldChecked, func() {
			for _, b := range c.backends {
				b.outstanding.Store(1)
				b.busySince.Store(at(t0 + 61*time.Millisecond + stallHoldChecked))
				b.stalledAt.Store(0)
			}
		}, 1},
		{t0 + 200*time.Millisecond + stallHoldChecked, nil, 0},
		// a passed check with requests still waiting unanswered: stalled
		{t0 + 201*time.Millisecond + stallHoldChecked, func() { c.backends[0].checkedOK.Store(at(t0 + 201*time.Millisecond + stallHoldChecked)) }, 0},
		// the waiting requests gone: the passed check ends the stall
		{t0 + 202*time.Millisecond + stallHoldChecked, func() { c.backends[0].outstanding.Store(0) }, 1},
		{t0 + 203*time.Millisecond + stallHoldChecked, func() {
			c.backends[0].outstanding.Store(1)
			c.backends[0].busySince.Store(at(t0 + 203*time.Millisecond + stallHoldChecked))
		}, 1},
		{t0 + 300*time.Millisecond + stallHoldChecked, nil, 0}, // unanswered again: stalled again
		{t0 + 301*time.Millisecond + stallHoldChecked, func() { c.backends[1].lastDone.Store(at(t0 + 301*time.Millisecond + stallHoldChecked)) }, 1}, // an answer
	} {
		if st.do != nil {
			st.do()
		}
		if got := c.share(at(st.at), after); got != st.share {
			t.Fatalf("checked cluster, step %d at %v: share %v, want %v", i, st.at, got, st.share)
		}
	}
}

// TestRetryToAnotherClusterWaitsNoBackoff: a retry that goes to a cluster
// not tried yet goes at once; the backoff (here one minute, full jitter)
// only separates attempts that come back to a cluster already tried.
// Before, five requests that each met a refused connection first waited
// up to a minute each (the client's 10 s guard fails them).
func TestRetryToAnotherClusterWaitsNoBackoff(t *testing.T) {
	b, hits := echoUpstream(t, "b")
	_, base := startGateway(t, fill(`
routes: [{name: r, clusters: [{name: dead}, {name: b}], timeout: 5m}]
clusters:
  - {name: dead, backends: [{address: DEAD}], outlier: {consecutive_errors: 1000}}
  - {name: b, backends: [{address: B}]}
retry: {policy: {initial: 1m, max_wait: 1m}, budget: {min_retries: 100}}
`, "DEAD", deadAddr(t), "B", b))
	cl := &http.Client{Timeout: 10 * time.Second}
	for i := range 5 {
		if resp, body := get(t, cl, base+"/"); resp.StatusCode != 200 || body != "b GET " {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
		}
	}
	if hits.Load() != 5 {
		t.Fatalf("b served %d, want 5", hits.Load())
	}
}
