package up

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strings"
	"syscall"
	"time"
)

// asyncKillRate is async-kill's burst, submissions/s to site a's gateway:
// above what its workers run (DefaultAsyncWorkers / DefaultReportLatency =
// 16/s), so that a backlog is queued when the kill comes.
const asyncKillRate = 40

// asyncStall is how long async-kill waits, once gateway a is back, for a
// missing invocation to run before it judges: two ack waits (an
// invocation whose worker died is redelivered after one).
const asyncStall = 2*asyncAckWait + 2*time.Second

func (c *Chaos) asyncBurst(ctx context.Context, rate float64, d time.Duration) (AsyncBurstResult, error) {
	var res AsyncBurstResult
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("http://%s/v1/fault/async?site=a&rate=%.0f&duration=%s", c.api, rate, d), nil)
	if err != nil {
		return res, err
	}
	cl := *c.client
	cl.Timeout = d + 10*time.Minute // the call answers when every submission has its 202 or gave up
	resp, err := cl.Do(req)
	if err != nil {
		return res, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return res, fmt.Errorf("POST /v1/fault/async: %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	return res, json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&res)
}

// backendRuns reads, from every backend the state names, the async runs
// since marks (addr -> the reading before the scenario; nil: take the
// current one as the mark).
type runMark struct {
	boot string
	last uint64
}

func markRuns(ctx context.Context, st State) (map[string]runMark, error) {
	marks := map[string]runMark{}
	for _, name := range sortedKeys(st.Backends) {
		for _, a := range st.Backends[name].Addrs {
			rr, err := readRuns(ctx, a, math.MaxUint64)
			if err != nil {
				return nil, fmt.Errorf("backend %s: %w", name, err)
			}
			marks[a] = runMark{boot: rr.Boot, last: rr.Last}
		}
	}
	return marks, nil
}

// runsSince returns every run after the marks, over all backends; a
// backend that restarted or forgot runs since its mark is an error (its
// count would be wrong).
func runsSince(ctx context.Context, marks map[string]runMark) ([]Run, error) {
	var all []Run
	for _, a := range sortedKeys(marks) {
		m := marks[a]
		rr, err := readRuns(ctx, a, m.last)
		if err != nil {
			return nil, err
		}
		if rr.Boot != m.boot {
			return nil, fmt.Errorf("%w: backend %s restarted during the scenario", errRunRecord, a)
		}
		if rr.Truncated {
			return nil, fmt.Errorf("%w: backend %s forgot runs since the scenario began (more than %d)", errRunRecord, a, maxRuns)
		}
		all = append(all, rr.Runs...)
	}
	return all, nil
}

// errRunRecord: a backend's record of runs cannot count the scenario.
var errRunRecord = errors.New("up: a backend's record of runs is incomplete")

// asyncTally is async-kill's count at the backends, by invocation id.
type asyncTally struct {
	ran, twice, lost int
	// violations: a run of one of the burst's keys under an id no 202
	// named for it, or an id run under another key.
	violations []string
	// gaveUpRan: runs of submissions that never got a 202 (stored before
	// the kill cut the answer off and not resent in time): allowed.
	gaveUpRan int
	missing   []string
}

func tallyAsync(res AsyncBurstResult, runs []Run) asyncTally {
	var t asyncTally
	prefix := "chaos-" + res.Nonce + "-"
	keyOfID := map[string]string{}
	for k, id := range res.IDs {
		keyOfID[id] = k
	}
	gaveUp := map[string]bool{}
	for _, k := range res.GaveUpKeys {
		gaveUp[k] = true
	}
	n := map[string]int{}
	for _, r := range runs {
		if k, ok := keyOfID[r.ID]; ok {
			n[r.ID]++
			if r.Key != k {
				t.violations = append(t.violations, fmt.Sprintf("%s ran with key %q, submitted with %q", r.ID, r.Key, k))
			}
			continue
		}
		if !strings.HasPrefix(r.Key, prefix) {
			continue // not this burst's (the steady submitter, another run)
		}
		if gaveUp[r.Key] {
			t.gaveUpRan++
			continue
		}
		t.violations = append(t.violations, fmt.Sprintf("%s ran for key %s, whose 202 named %s", r.ID, r.Key, res.IDs[r.Key]))
	}
	for _, k := range sortedKeys(res.IDs) {
		id := res.IDs[k]
		switch {
		case n[id] == 0:
			t.lost++
			t.missing = append(t.missing, id)
		case n[id] > 1:
			t.twice++
			t.ran++
		default:
			t.ran++
		}
	}
	sort.Strings(t.violations)
	return t
}

// runAsyncKill is issue 29's crash test in the running system: a burst of
// keyed submissions to site a's async route, SIGKILL of site a's gateway a
// third of the way in, veer up's restart; every submission that got a 202
// must run at least once at the backends (counted by invocation id), and
// more than once only under its own key.
func runAsyncKill(ctx context.Context, c *Chaos, r *Result) error {
	st, err := c.state(ctx)
	if err != nil {
		return err
	}
	gw := st.Gateways["a"]
	pid := gw.Pid
	queue := "embedded JetStream in the gateway's data dir (synced writes)"
	if st.NATS != "" {
		queue = "nats-server " + st.NATS + " (veer up's child), shared by both gateways"
	}
	if st.AsyncEphemeral {
		queue += "; async.ephemeral: the queue's store is wiped at each gateway start"
	}
	d := c.cfg.Window
	r.Mechanism = fmt.Sprintf("a burst of %d submissions/s for %v to site a's %s (async: true), each with its own Idempotency-Key, resent until it gets a 202; SIGKILL of site a's gateway (pid %d, %s) once a third of the burst got its 202; veer up restarts it after restart_after; queue: %s; runs counted at every backend by invocation id (GET %s)",
		asyncKillRate, d, PathReports, pid, strings.Join(gw.Addrs, ","), queue, PathRuns)
	marks, err := markRuns(ctx, st)
	if err != nil {
		return err
	}
	accepted0 := readGateway(ctx, gw.Admin).asyncAccepted
	type burst struct {
		res AsyncBurstResult
		err error
	}
	done := make(chan burst, 1)
	go func() {
		res, err := c.asyncBurst(ctx, asyncKillRate, d)
		done <- burst{res, err}
	}()
	// the kill comes once a third of the burst got its 202 (gateway a's
	// accepted submissions), or at the burst's end on a machine too slow
	// for that: a backlog must be queued for the kill to threaten it
	third := float64(asyncKillRate*d.Seconds()) / 3
	began := time.Now()
	for {
		g := readGateway(ctx, gw.Admin)
		if g.asyncAccepted-accepted0 >= third || time.Since(began) >= d {
			r.measure("SIGKILL after %.0f of the burst's 202s, %.1fs into it", g.asyncAccepted-accepted0, time.Since(began).Seconds())
			break
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	fmt.Fprintf(c.out, "chaos: async-kill: SIGKILL pid %d mid-burst\n", pid)
	killed := time.Now()
	if err := signal(pid, syscall.SIGKILL); err != nil {
		return err
	}
	// the restart is noted while the burst resends
	var restarted time.Time
	var b burst
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for got := false; !got; {
		select {
		case b = <-done:
			got = true
		case <-tick.C:
			if restarted.IsZero() {
				if cur, err := c.state(ctx); err == nil && cur.Gateways["a"].Pid != 0 && cur.Gateways["a"].Pid != pid {
					restarted = time.Now()
				}
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if b.err != nil {
		return b.err
	}
	res := b.res
	if restarted.IsZero() {
		if err := c.until(ctx, c.cfg.Recover, func(st State, _ Snapshot) bool {
			p := st.Gateways["a"].Pid
			return p != 0 && p != pid
		}); err != nil {
			return fmt.Errorf("gateway a not restarted: %w", err)
		}
		restarted = time.Now()
	}
	r.measure("gateway a restarted %.1fs after the kill", restarted.Sub(killed).Seconds())

	// wait until every 202 ran, or nothing more runs: the queue at gateway
	// a empty, or no progress for asyncStall
	var t asyncTally
	progress, lastLost := time.Now(), -1
	deadline := time.Now().Add(c.cfg.Recover)
	for {
		runs, err := runsSince(ctx, marks)
		if errors.Is(err, errRunRecord) {
			return err
		}
		if err != nil { // a slow backend: read again at the next poll
			if time.Now().After(deadline) {
				return err
			}
			if err := sleepCtx(ctx, 500*time.Millisecond); err != nil {
				return err
			}
			continue
		}
		t = tallyAsync(res, runs)
		if t.lost == 0 {
			break
		}
		if t.lost != lastLost {
			lastLost, progress = t.lost, time.Now()
		}
		cur, _ := c.state(ctx)
		g := readGateway(ctx, cur.Gateways["a"].Admin)
		idle := g.up && g.asyncOn && g.asyncDepth == 0 && st.NATS == ""
		if idle || time.Since(progress) > asyncStall || time.Now().After(deadline) {
			why := "no progress for " + asyncStall.String()
			if idle {
				why = "gateway a's queue empty"
			}
			r.measure("stopped waiting: %s", why)
			break
		}
		if err := sleepCtx(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
	r.measure("submitted %d, 202s %d, ran %d, ran twice %d, lost %d; %d resends while gateway a was down; %d got no 202 (%d of them ran anyway)",
		res.Submitted, res.Accepted, t.ran, t.twice, t.lost, res.Resends, res.GaveUp, t.gaveUpRan)
	if t.lost == 0 {
		r.measure("every 202 ran within %.1fs of the restart", time.Since(restarted).Seconds())
	} else {
		r.measure("lost, e.g. %s", strings.Join(t.missing[:min(3, len(t.missing))], ", "))
	}
	for _, v := range t.violations[:min(3, len(t.violations))] {
		r.measure("duplicate not under its own key: %s", v)
	}
	if res.Accepted > 0 {
		r.Success = float64(res.Accepted-t.lost) / float64(res.Accepted)
	}
	r.Pass = res.Accepted > 0 && t.lost == 0 && len(t.violations) == 0 && res.GaveUp == 0
	return nil
}
