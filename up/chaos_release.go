package up

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/veerhq/veer/control"
	"github.com/veerhq/veer/release"
)

// The release scenarios (issue 30 in veer up): both gateways serve the
// route releaseRoute (PathProfile) from clusters a1 (version A) and a2
// (B); a rollout through control's admin API moves its tenants from a1 to
// a2, each gateway counts both versions' outcomes per step and publishes
// them to the control store, and control's analysis promotes or aborts.
// The gateways follow release documents only from etcd (gateway
// control_store), so the scenarios need the control store on etcd.
const (
	releaseRoute = "profile"
	releaseFrom  = "a1"
	releaseTo    = "a2"
	// releaseTenants spread the release load (Veer-Tenant: tenant-000 ..);
	// the first releaseCanary are the plan's canary tenants (20 %).
	releaseTenants = 100
	releaseCanary  = 20
	// releaseRate is the release load, requests/s over both gateways.
	releaseRate = 100
	// releaseBadErrors is the bad version's share of 500s.
	releaseBadErrors = 0.05
	// releaseAbortWithin and releaseMaxFailed are issue 30's promise for a
	// B failing 5 %: rolled back within 30 s, at most 50 requests failed
	// by B. releaseHold is the plans' step bound.
	releaseAbortWithin = 30 * time.Second
	releaseMaxFailed   = 50
	releaseHold        = 30 * time.Second
	releaseSlow        = time.Second // the plans' slo.slow_threshold
	// releaseSweep is how long the release load is watched after the end
	// (every tenant reaches both gateways in 2 s at releaseRate).
	releaseSweep    = 3 * time.Second
	releaseSweepMax = 15 * time.Second
	// MaxReleaseLoad bounds POST /v1/fault/release-load.
	MaxReleaseRate     = 2000
	MaxReleaseDuration = 10 * time.Minute
)

// releaseYAML is the gateways' control_store section: they follow the
// control plane's etcd (release documents; its prefix too) when it has
// one.
func (s *System) releaseYAML() string {
	ec := s.controlStore()
	if len(ec.Endpoints) == 0 {
		return ""
	}
	q := make([]string, len(ec.Endpoints))
	for i, e := range ec.Endpoints {
		q[i] = strconv.Quote(e)
	}
	prefix := ""
	if ec.Prefix != "" {
		prefix = ", prefix: " + strconv.Quote(ec.Prefix)
	}
	return "control_store: {endpoints: [" + strings.Join(q, ", ") + "]" + prefix + "}\n"
}

// withReleaseClusters adds the release route's clusters to a gateway's
// (gateway b serves the route from site a's clusters too).
func withReleaseClusters(cs []string) []string {
	out := slices.Clone(cs)
	for _, c := range []string{releaseFrom, releaseTo} {
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

func releaseTenant(i int) string { return fmt.Sprintf("tenant-%03d", i) }

// ClusterCounts are the release load's answers from one cluster at one
// gateway: OK ones per tenant, and errors (a 5xx, or "none": no answer).
type ClusterCounts struct {
	OK      int64            `json:"ok"`
	Errors  int64            `json:"errors"`
	Tenants map[string]int64 `json:"tenants,omitempty"`
}

// ReleaseLoad is GET /v1/release-load: the release load's counts since
// veer up started, by site and cluster.
type ReleaseLoad struct {
	Running  bool                                `json:"running"`
	Requests int64                               `json:"requests"`
	Sites    map[string]map[string]ClusterCounts `json:"sites"`
}

// sub is l minus an earlier reading (the tenants' maps too).
func (l ReleaseLoad) sub(o ReleaseLoad) ReleaseLoad {
	out := ReleaseLoad{Running: l.Running, Requests: l.Requests - o.Requests, Sites: map[string]map[string]ClusterCounts{}}
	for site, cs := range l.Sites {
		out.Sites[site] = map[string]ClusterCounts{}
		for c, v := range cs {
			p := o.Sites[site][c]
			d := ClusterCounts{OK: v.OK - p.OK, Errors: v.Errors - p.Errors, Tenants: map[string]int64{}}
			for t, n := range v.Tenants {
				if n-p.Tenants[t] > 0 {
					d.Tenants[t] = n - p.Tenants[t]
				}
			}
			out.Sites[site][c] = d
		}
	}
	return out
}

// errorsOf sums the errors over both sites.
func (l ReleaseLoad) errorsOf() int64 {
	var n int64
	for _, cs := range l.Sites {
		for _, v := range cs {
			n += v.Errors
		}
	}
	return n
}

// releaseLoad is the running generator and its counts.
type releaseLoad struct {
	seq      atomic.Uint64 // numbers the requests (headerRequest)
	mu       sync.Mutex
	cancel   context.CancelFunc
	done     chan struct{}
	requests int64
	sites    map[string]map[string]*ClusterCounts
}

func (l *releaseLoad) record(site, cluster, tenant string, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sites == nil {
		l.sites = map[string]map[string]*ClusterCounts{}
	}
	if l.sites[site] == nil {
		l.sites[site] = map[string]*ClusterCounts{}
	}
	c := l.sites[site][cluster]
	if c == nil {
		c = &ClusterCounts{Tenants: map[string]int64{}}
		l.sites[site][cluster] = c
	}
	l.requests++
	if ok {
		c.OK++
		c.Tenants[tenant]++
	} else {
		c.Errors++
	}
}

// ReleaseLoad reads the release load's counts.
func (s *System) ReleaseLoad() ReleaseLoad {
	l := &s.relLoad
	l.mu.Lock()
	defer l.mu.Unlock()
	out := ReleaseLoad{Running: l.cancel != nil, Requests: l.requests, Sites: map[string]map[string]ClusterCounts{}}
	for site, cs := range l.sites {
		out.Sites[site] = map[string]ClusterCounts{}
		for c, v := range cs {
			cc := *v
			cc.Tenants = make(map[string]int64, len(v.Tenants))
			for t, n := range v.Tenants {
				cc.Tenants[t] = n
			}
			out.Sites[site][c] = cc
		}
	}
	return out
}

// StartReleaseLoad replaces the release load with rate requests/s for d
// (rate 0: stop): GET PathProfile alternating the gateways every
// releaseTenants requests, request n as tenant n mod releaseTenants, so
// that every tenant reaches both gateways every 2 × releaseTenants
// requests. It returns at once; the generator runs in the background.
func (s *System) StartReleaseLoad(rate float64, d time.Duration) error {
	if !(rate >= 0 && rate <= MaxReleaseRate) || d < 0 || d > MaxReleaseDuration {
		return fmt.Errorf("up: release load: rate 0..%d, duration up to %v", MaxReleaseRate, MaxReleaseDuration)
	}
	if s.env == nil || s.runCtx == nil {
		return errClosed
	}
	l := &s.relLoad
	l.mu.Lock()
	cancel, done := l.cancel, l.done
	l.cancel, l.done = nil, nil
	l.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	if rate == 0 || d == 0 {
		return nil
	}
	clients := map[string]*http.Client{}
	var trs []*http.Transport
	for _, site := range []string{"a", "b"} {
		tr, _, _, err := s.siteTransport(site, 32)
		if err != nil {
			for _, t := range trs {
				t.CloseIdleConnections()
			}
			return err
		}
		trs = append(trs, tr)
		clients[site] = &http.Client{Transport: tr, Timeout: s.cfg.RequestTimeout}
	}
	ctx, cancel := context.WithTimeout(s.runCtx, d)
	done = make(chan struct{})
	l.mu.Lock()
	l.cancel, l.done = cancel, done
	l.mu.Unlock()
	go func() {
		defer close(done)
		defer cancel()
		var wg sync.WaitGroup
		defer func() {
			wg.Wait()
			for _, tr := range trs {
				tr.CloseIdleConnections()
			}
			l.mu.Lock()
			if l.done == done {
				l.cancel, l.done = nil, nil
			}
			l.mu.Unlock()
		}()
		sem := make(chan struct{}, 128)
		t := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer t.Stop()
		for n := 0; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			site := [2]string{"a", "b"}[(n/releaseTenants)%2]
			tenant := releaseTenant(n % releaseTenants)
			select {
			case sem <- struct{}{}:
			default:
				l.record(site, "none", tenant, false) // the generator is behind: an error of the system
				continue
			}
			wg.Go(func() {
				defer func() { <-sem }()
				s.releaseOne(ctx, clients[site], site, tenant)
			})
		}
	}()
	return nil
}

func (s *System) releaseOne(ctx context.Context, c *http.Client, site, tenant string) {
	host := site + "." + s.cfg.Zone
	s.mu.Lock()
	port := s.state.Port
	s.mu.Unlock()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+host+":"+strconv.Itoa(port)+PathProfile, nil)
	if err != nil {
		return
	}
	req.Header.Set("Veer-Tenant", tenant)
	req.Header.Set(headerRequest, strconv.FormatUint(s.relLoad.seq.Add(1), 10))
	resp, err := c.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			l := &s.relLoad
			l.record(site, "none", tenant, false)
		}
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	cluster := resp.Header.Get(HeaderCluster)
	if cluster == "" {
		cluster = "none"
	}
	s.relLoad.record(site, cluster, tenant, resp.StatusCode/100 == 2)
}

// handleReleaseLoad serves POST /v1/fault/release-load?rate=R&duration=D.
func (s *System) handleReleaseLoad(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	rate, err1 := strconv.ParseFloat(q.Get("rate"), 64)
	d, err2 := time.ParseDuration(q.Get("duration"))
	if err1 != nil || err2 != nil {
		http.Error(w, "rate (requests/s, 0 stops) and duration (e.g. 60s) required", http.StatusBadRequest)
		return
	}
	if err := s.StartReleaseLoad(rate, d); err != nil {
		code := http.StatusBadRequest
		if errors.Is(err, errClosed) {
			code = http.StatusServiceUnavailable
		}
		http.Error(w, err.Error(), code)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// --- the chaos side ---

// slowClient is for the calls a loaded machine may answer slowly (control
// on etcd, the release load's counts, the backends' run records): a
// scenario reads again rather than fail on one slow answer.
var slowClient = &http.Client{Timeout: 10 * time.Second}

// controlAdmin calls control's admin API with the operator's token.
func (c *Chaos) controlAdmin(ctx context.Context, st State, method, path string, body, out any) error {
	raw, err := os.ReadFile(st.ControlTokenFile)
	if err != nil {
		return fmt.Errorf("control's admin token: %w", err)
	}
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+st.Admin+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(raw)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Veer-Reason", "veer chaos")
	resp, err := slowClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(b)))
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

func (c *Chaos) releaseLoad(ctx context.Context, rate float64, d time.Duration) error {
	return c.post(ctx, fmt.Sprintf("/v1/fault/release-load?rate=%.0f&duration=%s", rate, d))
}

func (c *Chaos) readReleaseLoad(ctx context.Context) (ReleaseLoad, error) {
	var l ReleaseLoad
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.api+"/v1/release-load", nil)
	if err != nil {
		return l, err
	}
	resp, err := slowClient.Do(req)
	if err != nil {
		return l, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return l, fmt.Errorf("/v1/release-load: %s", resp.Status)
	}
	return l, json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&l)
}

// setVersion makes cluster's backends answer PathProfile as a bad version
// (errShare 500s, slow x latency) or a good one (0, 1).
func setVersion(ctx context.Context, st State, cluster string, errShare, slow float64) error {
	for _, a := range st.Backends[cluster].Addrs {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("http://%s%s?errors=%g&slow=%g", a, PathFault, errShare, slow), nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return fmt.Errorf("backend %s of %s: %w", a, cluster, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			return fmt.Errorf("backend %s of %s: %s", a, cluster, resp.Status)
		}
	}
	return nil
}

// gatewayRelease reads a gateway's applied rollout of the release route
// (GET /admin/release); found false when it applies none.
func gatewayRelease(ctx context.Context, admin, token string) (status release.Status, id string, found bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/admin/release", nil)
	if err != nil {
		return "", "", false, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	cl := &http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Do(req)
	if err != nil {
		return "", "", false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", "", false, fmt.Errorf("%s/admin/release: %s", admin, resp.Status)
	}
	var rs []struct {
		Route  string         `json:"route"`
		ID     string         `json:"id"`
		Status release.Status `json:"status"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&rs); err != nil {
		return "", "", false, err
	}
	for _, r := range rs {
		if r.Route == releaseRoute {
			return r.Status, r.ID, true, nil
		}
	}
	return "", "", false, nil
}

// gatewaysApply waits until both gateways apply rollout id with status.
func (c *Chaos) gatewaysApply(ctx context.Context, st State, id string, want release.Status, within time.Duration) (time.Duration, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		n := 0
		for _, g := range st.Gateways {
			s, gid, found, err := gatewayRelease(ctx, g.Admin, st.Token)
			if err == nil && found && gid == id && s == want {
				n++
			}
		}
		if n == len(st.Gateways) {
			return time.Since(start), nil
		}
		if err := sleepCtx(ctx, pollEvery); err != nil {
			return 0, fmt.Errorf("not every gateway applies rollout %s as %s within %v", id, want, within)
		}
	}
}

// releasePlan is the scenarios' plan: canary tenants then rings, or
// blue-green.
func releasePlan(blueGreen bool) map[string]any {
	// slow_threshold: a loaded machine (-race beside other tests) puts a
	// few percent of healthy answers over the default 500 ms, which the
	// slow test, against A's floor, would take for a slow B
	p := map[string]any{"route": releaseRoute, "from": releaseFrom, "to": releaseTo, "hold": releaseHold.String(),
		"slo": map[string]any{"slow_threshold": releaseSlow.String()}}
	if blueGreen {
		p["blue_green"] = true
		return p
	}
	var canary []string
	for i := range releaseCanary {
		canary = append(canary, releaseTenant(i))
	}
	p["canary_tenants"], p["rings"] = canary, []float64{50, 100}
	return p
}

// rollout runs one rollout of the release route under the release load:
// it starts it (pausing it at once when the judge is off), waits until it
// is aborted or done or until within, and returns the last status read
// and when it ended (zero: it did not).
func (c *Chaos) rollout(ctx context.Context, st State, r *Result, blueGreen bool, within time.Duration) (control.RolloutStatus, time.Duration, error) {
	var started control.RolloutStatus
	reason := fmt.Sprintf("veer chaos %s %d", r.Name, time.Now().UnixNano())
	for try := 0; ; try++ {
		err := c.controlAdmin(ctx, st, http.MethodPost, "/v1/admin/rollouts/"+releaseRoute,
			map[string]any{"action": "start", "plan": releasePlan(blueGreen), "reason": reason}, &started)
		if err == nil {
			break
		}
		// a store that timed out answers 503 (Retry-After): an operator
		// tries again; a start that was written before its answer was
		// lost is found by its reason (the retry's 409)
		var cur control.RolloutStatus
		if c.controlAdmin(ctx, st, http.MethodGet, "/v1/admin/rollouts/"+releaseRoute, nil, &cur) == nil &&
			cur.Rollout.Active() && strings.HasSuffix(cur.Rollout.Reason, reason) {
			started = cur
			break
		}
		if try == 4 || !strings.Contains(err.Error(), "503") {
			return started, 0, err
		}
		r.measure("start refused (%v); again in 1s", err)
		if err := sleepCtx(ctx, time.Second); err != nil {
			return started, 0, err
		}
	}
	start := time.Now()
	if c.cfg.ReleaseJudgeOff {
		// the operator's pause: the analysis judges running rollouts only
		if err := c.controlAdmin(ctx, st, http.MethodPost, "/v1/admin/rollouts/"+releaseRoute,
			map[string]any{"action": "pause", "reason": "veer chaos: judge off"}, nil); err != nil {
			return started, 0, err
		}
		r.measure("judge off: the rollout paused at once (no analysis)")
	}
	var cur control.RolloutStatus
	var lastErr error
	read := false
	for {
		// a slow answer (a loaded machine, etcd) is read again at the
		// next poll; only a bound without one good read is an error
		var got control.RolloutStatus
		if err := c.controlAdmin(ctx, st, http.MethodGet, "/v1/admin/rollouts/"+releaseRoute, nil, &got); err != nil {
			lastErr = err
		} else {
			cur, read = got, true
		}
		if read && cur.Rollout.ID == started.Rollout.ID && !cur.Rollout.Active() {
			return cur, time.Since(start), nil
		}
		if time.Since(start) > within {
			if !read {
				return cur, 0, lastErr
			}
			return cur, 0, nil
		}
		if err := sleepCtx(ctx, pollEvery); err != nil {
			return cur, 0, err
		}
	}
}

// endRollout aborts a rollout still active and removes the release
// document, so that the route is on its own policy again.
func (c *Chaos) endRollout(ctx context.Context, st State) {
	var cur control.RolloutStatus
	if err := c.controlAdmin(ctx, st, http.MethodGet, "/v1/admin/rollouts/"+releaseRoute, nil, &cur); err == nil && cur.Rollout.Active() {
		_ = c.controlAdmin(ctx, st, http.MethodPost, "/v1/admin/rollouts/"+releaseRoute, map[string]any{"action": "abort", "reason": "veer chaos: end of scenario"}, nil)
	}
	_ = c.controlAdmin(ctx, st, http.MethodDelete, "/v1/admin/docs/"+release.KeyPrefix+releaseRoute, nil, nil)
}

// sweep watches the release load until every tenant has had an answer
// at both gateways (releaseSweep at releaseRate) or releaseSweepMax (a
// starved generator) and returns its counts over that time.
func (c *Chaos) sweep(ctx context.Context) (ReleaseLoad, time.Duration, error) {
	start := time.Now()
	l0, err := c.readReleaseLoad(ctx)
	if err != nil {
		return ReleaseLoad{}, 0, err
	}
	if err := sleepCtx(ctx, releaseSweep); err != nil {
		return ReleaseLoad{}, 0, err
	}
	for {
		l1, err := c.readReleaseLoad(ctx)
		if err != nil {
			return ReleaseLoad{}, 0, err
		}
		d := l1.sub(l0)
		if covered(d) || time.Since(start) > releaseSweepMax {
			return d, time.Since(start), nil
		}
		if err := sleepCtx(ctx, 500*time.Millisecond); err != nil {
			return ReleaseLoad{}, 0, err
		}
	}
}

// covered: every tenant had an answer (from any cluster, or an error) at
// both gateways.
func covered(l ReleaseLoad) bool {
	for _, site := range []string{"a", "b"} {
		seen := map[string]bool{}
		for _, v := range l.Sites[site] {
			for t := range v.Tenants {
				seen[t] = true
			}
		}
		if len(seen) < releaseTenants {
			return false
		}
	}
	return true
}

// allOn says whether, in a sweep, every tenant was answered by cluster at
// both gateways and no answer came from another cluster.
func allOn(l ReleaseLoad, cluster string) (bool, string) {
	var parts []string
	ok := true
	for _, site := range []string{"a", "b"} {
		cs := l.Sites[site]
		tenants := len(cs[cluster].Tenants)
		others := int64(0)
		for c, v := range cs {
			if c != cluster {
				others += v.OK + v.Errors
			}
		}
		errs := cs[cluster].Errors
		parts = append(parts, fmt.Sprintf("gateway %s: %d of %d tenants answered by %s, %d answers elsewhere, %d errors", site, tenants, releaseTenants, cluster, others, errs))
		ok = ok && tenants == releaseTenants && others == 0 && errs == 0
	}
	return ok, strings.Join(parts, "; ")
}

func needsEtcd(st State) string {
	if len(st.ControlStore) == 0 {
		return "needs the control store on etcd (the gateways follow release documents only from etcd): veer up with the control plane on etcd"
	}
	return ""
}

// runBadRelease is issue 30's bad canary: cluster a2 (B) answers 5 % of
// the release route's requests with 500; a rollout from a1 to a2 (10
// canary tenants, then rings of 50 and 100 %) must be aborted by the
// analysis within releaseAbortWithin, with at most releaseMaxFailed of
// B's requests failed, and every tenant back on a1 at both gateways.
func runBadRelease(ctx context.Context, c *Chaos, r *Result) error {
	st, err := c.state(ctx)
	if err != nil {
		return err
	}
	if why := needsEtcd(st); why != "" {
		return errors.New(why)
	}
	r.Mechanism = fmt.Sprintf("cluster a2's backends told to answer %.0f%% of %s with 500 (POST %s; the same requests on both backends, by a hash of the request's number, so that the gateway's retry on a2's other backend fails too); a rollout of route %s from a1 to a2 through control's admin API (POST %s/v1/admin/rollouts/%s: %d canary tenants of %d, then rings 50, 100 %%, hold %v, slo.slow_threshold %v, the rest of the SLO at its defaults) under %d requests/s over both gateways",
		100*releaseBadErrors, PathProfile, PathFault, releaseRoute, st.Admin, releaseRoute, releaseCanary, releaseTenants, releaseHold, releaseSlow, releaseRate)
	defer c.endRollout(context.WithoutCancel(ctx), st)
	defer setVersion(context.WithoutCancel(ctx), st, releaseTo, 0, 1) //nolint:errcheck // best effort at the end
	defer c.releaseLoad(context.WithoutCancel(ctx), 0, 0)             //nolint:errcheck
	if err := c.releaseLoad(ctx, releaseRate, MaxReleaseDuration); err != nil {
		return err
	}
	if err := setVersion(ctx, st, releaseTo, releaseBadErrors, 1); err != nil {
		return err
	}
	within := min(releaseAbortWithin, c.cfg.Detect)
	l0, err := c.readReleaseLoad(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.out, "chaos: bad-release: rollout %s a1 -> a2 (a2 fails %.0f%%)\n", releaseRoute, 100*releaseBadErrors)
	cur, took, err := c.rollout(ctx, st, r, false, within)
	if err != nil {
		return err
	}
	l1, err := c.readReleaseLoad(ctx)
	if err != nil {
		return err
	}
	cost := l1.sub(l0)
	var bFailed, bReq int64
	if n := len(cur.Rollout.Verdicts); n > 0 {
		bFailed, bReq = cur.Rollout.Verdicts[n-1].B.Errors, cur.Rollout.Verdicts[n-1].B.Requests
	} else {
		bFailed, bReq = cur.B.Errors, cur.B.Requests
	}
	aborted := took > 0 && cur.Rollout.Status == release.Aborted
	if aborted {
		r.measure("aborted by the analysis %.1fs after the start (promise: within %v): %s", took.Seconds(), releaseAbortWithin, cur.Rollout.Reason)
	} else {
		r.measure("not aborted within %v: status %s, step %d (%s)", within, cur.Rollout.Status, cur.Rollout.Step, cur.Rollout.Reason)
	}
	r.measure("the canary cost %d failed requests of B's %d (promise: at most %d); the load saw %d errors in all (%d from a2)",
		bFailed, bReq, releaseMaxFailed, cost.errorsOf(), cost.Sites["a"][releaseTo].Errors+cost.Sites["b"][releaseTo].Errors)
	back := false
	if aborted {
		d, err := c.gatewaysApply(ctx, st, cur.Rollout.ID, release.Aborted, 10*time.Second)
		if err != nil {
			r.measure("%v", err)
		} else {
			r.measure("both gateways apply the abort %.1fs after control decided", d.Seconds())
			sw, took, err := c.sweep(ctx)
			if err != nil {
				return err
			}
			var why string
			back, why = allOn(sw, releaseFrom)
			r.measure("over %.1fs after: %s", took.Seconds(), why)
		}
	}
	if bReq > 0 {
		r.Success = 1 - float64(bFailed)/float64(bReq)
	}
	r.Pass = aborted && took <= releaseAbortWithin && bFailed <= releaseMaxFailed && back
	return nil
}

// runGoodRelease is issue 30's healthy B: a blue-green rollout from a1 to
// a healthy a2 under the release load must be promoted (done) within its
// hold with no failed request, and every tenant on a2 at both gateways.
func runGoodRelease(ctx context.Context, c *Chaos, r *Result) error {
	st, err := c.state(ctx)
	if err != nil {
		return err
	}
	if why := needsEtcd(st); why != "" {
		return errors.New(why)
	}
	r.Mechanism = fmt.Sprintf("a blue-green rollout of route %s from a1 to a healthy a2 through control's admin API (hold %v, slo.slow_threshold %v, the rest of the SLO at its defaults) under %d requests/s over both gateways",
		releaseRoute, releaseHold, releaseSlow, releaseRate)
	defer c.endRollout(context.WithoutCancel(ctx), st)
	defer c.releaseLoad(context.WithoutCancel(ctx), 0, 0) //nolint:errcheck
	if err := setVersion(ctx, st, releaseTo, 0, 1); err != nil {
		return err
	}
	if err := c.releaseLoad(ctx, releaseRate, MaxReleaseDuration); err != nil {
		return err
	}
	l0, err := c.readReleaseLoad(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.out, "chaos: good-release: blue-green %s a1 -> a2\n", releaseRoute)
	cur, took, err := c.rollout(ctx, st, r, true, min(releaseHold+5*time.Second, c.cfg.Detect))
	if err != nil {
		return err
	}
	l1, err := c.readReleaseLoad(ctx)
	if err != nil {
		return err
	}
	cost := l1.sub(l0)
	done := took > 0 && cur.Rollout.Status == release.Done
	for i, v := range cur.Rollout.Verdicts {
		r.measure("step %d: %s", i, v.Reason)
	}
	if done {
		r.measure("promoted (done) %.1fs after the start", took.Seconds())
	} else {
		r.measure("not promoted: status %s (%s)", cur.Rollout.Status, cur.Rollout.Reason)
	}
	r.measure("%d requests of the load during the rollout, %d failed", cost.Requests, cost.errorsOf())
	on := false
	if done {
		if _, err := c.gatewaysApply(ctx, st, cur.Rollout.ID, release.Done, 10*time.Second); err != nil {
			r.measure("%v", err)
		} else {
			sw, took, err := c.sweep(ctx)
			if err != nil {
				return err
			}
			var why string
			on, why = allOn(sw, releaseTo)
			r.measure("over %.1fs after: %s", took.Seconds(), why)
		}
	}
	if cost.Requests > 0 {
		r.Success = 1 - float64(cost.errorsOf())/float64(cost.Requests)
	}
	r.Pass = done && cost.errorsOf() == 0 && cost.Requests > 0 && on
	return nil
}
