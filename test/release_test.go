package test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/control"
	"github.com/veerhq/veer/gateway"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/release"
	"github.com/veerhq/veer/store"
	"github.com/veerhq/veer/store/storeetcd"
	"github.com/veerhq/veer/store/storeetcd/etcdtest"
)

// releaseRig is one real etcd, a control plane on it running the rollout
// loop, two gateways following it and publishing their counts, and the two
// versions' backends.
type releaseRig struct {
	t        *testing.T
	admin    string
	token    string
	gws      []*gateway.Gateway
	applied  []chan int64 // each gateway's handled release revisions
	store    store.Store
	bFirst   atomic.Int64 // unix nanos of B's first request
	bServed  atomic.Int64
	bFailed  atomic.Int64
	failRate float64
	aDelay   time.Duration // each answer's latency (a time.Sleep in the backend: the version's speed)
	bDelay   time.Duration
	// bRouteFirst is when v2 first answered a request of route api (unix
	// nanos); a request under /direct/hold waits on v2 until hold is
	// closed, after it closed held.
	bRouteFirst atomic.Int64
	held, hold  chan struct{}
	b200        chan struct{} // closed when v2 served 200 requests of route api
	// bTail of B's answers take bTailDelay instead of bDelay (a B slow in
	// its tail only)
	bTail      float64
	bTailDelay time.Duration
}

const releaseGatewayYAML = `
listen: {addr: 'off', plain: '127.0.0.1:0'}
admin: {addr: '127.0.0.1:0'}
retry: {disabled: true}
routes:
  - {name: api, try_timeout: 5s, clusters: [{name: v1}, {name: v2}]}
  - {name: direct, path_prefix: /direct, try_timeout: 30s, clusters: [{name: v2}]}
clusters:
  - {name: v1, backends: [{address: '%V1%'}]}
  - {name: v2, backends: [{address: '%V2%'}]}
`

func newReleaseRig(t *testing.T, failRate float64, aDelay, bDelay time.Duration, opts ...func(*releaseRig)) *releaseRig {
	r := &releaseRig{t: t, failRate: failRate, aDelay: aDelay, bDelay: bDelay, held: make(chan struct{}), hold: make(chan struct{}), b200: make(chan struct{})}
	for _, o := range opts {
		o(r)
	}
	etcd := etcdtest.New(t)
	open := func() store.Store {
		st, err := storeetcd.New(storeetcd.Config{Endpoints: []string{etcd.URL}, RequestTimeout: 10 * time.Second}, storeetcd.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	r.store = open()
	v1 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if r.aDelay > 0 {
			time.Sleep(r.aDelay)
		}
		io.WriteString(w, "v1")
	}))
	t.Cleanup(v1.Close)
	v2 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/direct/hold" {
			close(r.held)
			<-r.hold
			io.WriteString(w, "v2 held")
			return
		}
		r.bFirst.CompareAndSwap(0, time.Now().UnixNano())
		r.bRouteFirst.CompareAndSwap(0, time.Now().UnixNano())
		if r.bServed.Add(1) == 200 {
			close(r.b200)
		}
		switch {
		case r.bTail > 0 && rand.Float64() < r.bTail:
			time.Sleep(r.bTailDelay)
		case r.bDelay > 0:
			time.Sleep(r.bDelay)
		}
		if rand.Float64() < r.failRate {
			r.bFailed.Add(1)
			http.Error(w, "v2 broken", http.StatusInternalServerError)
			return
		}
		io.WriteString(w, "v2")
	}))
	t.Cleanup(v2.Close)

	dir := t.TempDir()
	svc, err := control.New(control.Config{DataDir: dir, Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0"},
		control.Options{Store: open(), Logger: obs.Discard})
	if err != nil {
		t.Fatal(err)
	}
	addrs, err := svc.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	r.admin = "http://" + addrs.Admin
	path, _ := svc.AdminTokenFile()
	tok, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r.token = strings.TrimSpace(string(tok))

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for i := range 2 {
		var cfg gateway.Config
		y := strings.NewReplacer("%V1%", v1.Listener.Addr().String(), "%V2%", v2.Listener.Addr().String()).Replace(releaseGatewayYAML)
		if err := config.Parse([]byte(y), "gw.yaml", &cfg); err != nil {
			t.Fatal(err)
		}
		g, err := gateway.New(cfg, gateway.Options{Logger: obs.Discard, Registerer: prometheus.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer scancel()
			_ = g.Shutdown(sctx)
		})
		ch := make(chan int64, 1024)
		st := open()
		name := fmt.Sprintf("gw%d", i)
		wg.Add(2)
		go func() {
			defer wg.Done()
			g.Announce(ctx, st, gateway.AnnounceOptions{Name: name}) // the control plane checks plans against it and waits for it in a drain
		}()
		go func() {
			defer wg.Done()
			g.FollowStore(ctx, st, gateway.StoreOptions{Name: name, Backoff: 50 * time.Millisecond,
				OnRelease: func(rev int64) {
					select {
					case ch <- rev:
					default:
					}
				}})
		}()
		r.gws = append(r.gws, g)
		r.applied = append(r.applied, ch)
	}
	r.waitAnnounced(len(r.gws))
	return r
}

// waitAnnounced blocks until n gateways are announced, watching the store.
func (r *releaseRig) waitAnnounced(n int) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	docs, rev, err := r.store.List(ctx, store.KeyGatewaysPrefix)
	if err != nil {
		r.t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, d := range docs {
		seen[d.Key] = true
	}
	if len(seen) >= n {
		return
	}
	for ev := range r.store.Watch(ctx, store.KeyGatewaysPrefix, rev+1) {
		if ev.Type == store.Put {
			seen[ev.Doc.Key] = true
		}
		if len(seen) >= n {
			return
		}
	}
	r.t.Fatalf("%d of %d gateways announced within 20 s", len(seen), n)
}

func (r *releaseRig) post(body string) control.RolloutStatus {
	r.t.Helper()
	code, b := r.call("POST", "/v1/admin/rollouts/api", body)
	if code != 200 {
		r.t.Fatalf("POST rollout: %d %s", code, b)
	}
	var s control.RolloutStatus
	json.Unmarshal(b, &s)
	return s
}

// call sends an admin request with the admin token.
func (r *releaseRig) call(method, path, body string) (int, []byte) {
	r.t.Helper()
	req, _ := http.NewRequest(method, r.admin+path, bytes.NewReader([]byte(body)))
	req.Header.Set("Authorization", "Bearer "+r.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// load sends rate req/s spread over tenants and both gateways until stop is
// closed, and counts the answers: ok and failed per version body.
type loadResult struct {
	sent, failed atomic.Int64
	onB          atomic.Int64
}

func (r *releaseRig) load(stop <-chan struct{}, rate, tenants int, res *loadResult) *sync.WaitGroup {
	jobs := make(chan int, 256)
	var wg sync.WaitGroup
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range jobs {
				g := r.gws[n%len(r.gws)]
				req, _ := http.NewRequest("GET", "http://"+g.Addrs().Plain+"/", nil)
				req.Header.Set(gateway.DefaultTenantHeader, fmt.Sprintf("tenant-%d", rand.IntN(tenants)))
				res.sent.Add(1)
				resp, err := client.Do(req)
				if err != nil {
					res.failed.Add(1)
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					res.failed.Add(1)
				}
				if string(b) == "v2" {
					res.onB.Add(1)
				}
			}
		}()
	}
	wg.Add(1)
	go func() { // the pacer: rate requests a second
		defer wg.Done()
		defer close(jobs)
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			case <-tick.C:
				select {
				case jobs <- n:
				default: // the workers are behind: the rate drops, nothing queues
				}
			}
		}
	}()
	return &wg
}

// waitRollout blocks until the route's rollout document satisfies cond,
// watching the store (no polling), bounded by limit.
func (r *releaseRig) waitRollout(limit time.Duration, cond func(release.Rollout) bool) (release.Rollout, store.Doc) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	if d, err := r.store.Get(ctx, release.KeyPrefix+"api"); err == nil {
		if ro, err := release.ParseRollout(d.Value, d.Key); err == nil && cond(ro) {
			return ro, d
		}
	}
	for ev := range r.store.Watch(ctx, release.KeyPrefix+"api", 1) {
		if ev.Type != store.Put {
			continue
		}
		if ro, err := release.ParseRollout(ev.Doc.Value, ev.Doc.Key); err == nil && cond(ro) {
			return ro, ev.Doc
		}
	}
	r.t.Fatalf("rollout not reached within %v", limit)
	return release.Rollout{}, store.Doc{}
}

// waitGateways blocks until every gateway handled revision rev.
func (r *releaseRig) waitGateways(rev int64) {
	r.t.Helper()
	deadline := time.After(10 * time.Second)
	for i, ch := range r.applied {
		for got := int64(0); got < rev; {
			select {
			case got = <-ch:
			case <-deadline:
				r.t.Fatalf("gateway %d did not apply revision %d", i, rev)
			}
		}
	}
}

const releasePlan = `"plan":{"from":"v1","to":"v2","canary_tenants":[%s],"rings":[10,50,100],"hold":"60s"}`

func canaries(n int) string {
	var s []string
	for i := range n {
		s = append(s, fmt.Sprintf("%q", fmt.Sprintf("tenant-%d", i)))
	}
	return strings.Join(s, ",")
}

// A healthy B at steady load (500 req/s over 1000 tenants, two gateways)
// is promoted step by step to done by the control plane's analysis of the
// gateways' counts, with no failed request at all.
func TestReleaseHealthyPromoted(t *testing.T) {
	r := newReleaseRig(t, 0, 0, 0)
	stop := make(chan struct{})
	var res loadResult
	wg := r.load(stop, 500, 1000, &res)
	start := time.Now()
	st := r.post(`{"action":"start",` + fmt.Sprintf(releasePlan, canaries(50)) + `,"reason":"e2e healthy"}`)
	ro, _ := r.waitRollout(60*time.Second, func(ro release.Rollout) bool { return ro.ID == st.Rollout.ID && !ro.Active() })
	took := time.Since(start)
	close(stop)
	wg.Wait()
	if ro.Status != release.Done {
		t.Fatalf("healthy rollout ended %s: %s", ro.Status, ro.Reason)
	}
	for _, v := range ro.Verdicts {
		t.Logf("verdict: %s: %s", v.Decision, v.Reason)
	}
	t.Logf("done in %v; %d requests sent, %d failed, %d served by v2", took.Round(100*time.Millisecond), res.sent.Load(), res.failed.Load(), res.onB.Load())
	if res.failed.Load() != 0 {
		t.Fatalf("%d requests failed over a healthy rollout", res.failed.Load())
	}
	if len(ro.Verdicts) != ro.Plan.Steps() {
		t.Fatalf("%d verdicts for %d steps", len(ro.Verdicts), ro.Plan.Steps())
	}
}

// A B failing 5 % of its requests is aborted within 30 s of its first
// request, with at most 50 of B's requests failed, and then every tenant is
// on A.
func TestReleaseBadAborted(t *testing.T) {
	testReleaseAborted(t, func(t *testing.T) *releaseRig { return newReleaseRig(t, 0.05, 0, 0) }, "")
}

// A B answering in 3× A's time (30 ms against 10 ms; slow_threshold 20 ms,
// near A's p99) is aborted within 60 s of its first request, then every
// tenant is on A.
func TestReleaseSlowAborted(t *testing.T) {
	testReleaseAborted(t, func(t *testing.T) *releaseRig { return newReleaseRig(t, 0, 10*time.Millisecond, 30*time.Millisecond) }, `"slow_threshold":"20ms"`)
}

// A B whose p99 alone is 3x A's or more (both answer in 10 ms, but 3 % of
// B's answers take 150 ms: A's p99 at the gateway is 11-20 ms on a quiet
// machine and up to 50 ms on a loaded one) is aborted within 60 s of its
// first request at the default SLO (slow_threshold 500 ms, which none of
// these answers reach): the tail test's work.
func TestReleaseTailAborted(t *testing.T) {
	testReleaseAborted(t, func(t *testing.T) *releaseRig {
		return newReleaseRig(t, 0, 10*time.Millisecond, 10*time.Millisecond, func(r *releaseRig) { r.bTail, r.bTailDelay = 0.03, 150*time.Millisecond })
	}, "-")
}

// releaseRuns repeats each real bad-B case (make bench-release: 20 runs)
// and logs the distribution of its figures.
var releaseRuns = flag.Int("release.runs", 1, "runs of each real bad-B rollout case (TestRelease*Aborted), each on a fresh rig; more than 1 logs the distribution")

// testReleaseAborted runs a bad-B case *releaseRuns times, each on a rig
// of its own (mk), and with more than one run logs the distribution of the
// time from B's first request to the abort and of B's failed requests.
func testReleaseAborted(t *testing.T, mk func(*testing.T) *releaseRig, slo string) {
	if *releaseRuns <= 1 {
		releaseAbortRun(t, mk(t), slo)
		return
	}
	var took []time.Duration
	var failed []int64
	for i := range *releaseRuns {
		t.Run(fmt.Sprintf("run%02d", i+1), func(t *testing.T) {
			d, f := releaseAbortRun(t, mk(t), slo)
			took, failed = append(took, d), append(failed, f)
		})
	}
	slices.Sort(took)
	slices.Sort(failed)
	q := func(n int, p float64) int { return min(n-1, int(p*float64(n))) }
	if n := len(took); n > 0 {
		t.Logf("%d of %d runs aborted; time from B's first request to the abort: min %v, median %v, p90 %v, max %v; B's failed requests: min %d, median %d, p90 %d, max %d",
			n, *releaseRuns, took[0].Round(100*time.Millisecond), took[q(n, 0.5)].Round(100*time.Millisecond), took[q(n, 0.9)].Round(100*time.Millisecond), took[n-1].Round(100*time.Millisecond),
			failed[0], failed[q(n, 0.5)], failed[q(n, 0.9)], failed[n-1])
		var all []string
		for i := range took {
			all = append(all, took[i].Round(100*time.Millisecond).String())
		}
		t.Logf("every time to abort, sorted: %s; every failed count, sorted: %v", strings.Join(all, " "), failed)
	}
}

// releaseAbortRun is one run of a bad-B case: the time from B's first
// request to the abort and how many of B's requests failed until every
// gateway applied it.
func releaseAbortRun(t *testing.T, r *releaseRig, slo string) (time.Duration, int64) {
	within := 30 * time.Second
	plan := fmt.Sprintf(releasePlan, canaries(50))
	switch slo {
	case "":
	case "-": // a latency case at the default SLO
		within = 60 * time.Second
	default:
		within = 60 * time.Second
		plan = strings.Replace(plan, `"hold":"60s"`, `"hold":"60s","slo":{`+slo+`}`, 1)
	}
	stop := make(chan struct{})
	var res loadResult
	wg := r.load(stop, 500, 1000, &res)
	defer func() { close(stop); wg.Wait() }()
	st := r.post(`{"action":"start",` + plan + `,"reason":"e2e bad"}`)
	ro, d := r.waitRollout(60*time.Second, func(ro release.Rollout) bool { return ro.ID == st.Rollout.ID && !ro.Active() })
	abortedAt := time.Now()
	if ro.Status != release.Aborted {
		t.Fatalf("bad rollout ended %s: %s", ro.Status, ro.Reason)
	}
	first := time.Unix(0, r.bFirst.Load())
	detect := abortedAt.Sub(first)
	t.Logf("aborted %v after B's first request, at step %d; B served %d, failed %d; reason: %s", detect.Round(100*time.Millisecond), ro.Step, r.bServed.Load(), r.bFailed.Load(), ro.Reason)
	if detect > within {
		t.Errorf("aborted %v after B's first request, want within %v", detect, within)
	}
	r.waitGateways(d.Revision)
	failedAtAbort := r.bFailed.Load()
	if failedAtAbort > 50 {
		t.Errorf("B failed %d requests before the abort reached the gateways, want at most 50", failedAtAbort)
	}
	// every tenant on A at every gateway
	served := r.bServed.Load()
	var wrong atomic.Value
	var cw sync.WaitGroup
	for _, g := range r.gws {
		for w := range 16 { // 16 checkers a gateway, each a slice of the 1000 tenants
			cw.Add(1)
			go func() {
				defer cw.Done()
				for i := w; i < 1000; i += 16 {
					req, _ := http.NewRequest("GET", "http://"+g.Addrs().Plain+"/", nil)
					req.Header.Set(gateway.DefaultTenantHeader, fmt.Sprintf("tenant-%d", i))
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						wrong.Store(err.Error())
						return
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if string(b) != "v1" {
						wrong.Store(fmt.Sprintf("tenant-%d answered %q", i, b))
					}
				}
			}()
		}
	}
	cw.Wait()
	if w := wrong.Load(); w != nil {
		t.Fatalf("after the abort: %v", w)
	}
	// in-flight requests may have finished on B; nothing new went there
	if late := r.bServed.Load() - served; late > 32 { // at most the load's 32 workers in flight
		t.Errorf("B served %d requests after every gateway applied the abort", late)
	}
	return detect, failedAtAbort
}

// A plan naming a cluster or a route that the (real, announced) gateways
// lack is refused with 400 naming the field and the gateway, and no
// rollout is written; a release document cannot be written around that
// check through the documents API.
func TestReleaseRefusesUnknownRouteOrCluster(t *testing.T) {
	r := newReleaseRig(t, 0, 0, 0)
	for _, c := range []struct{ route, plan, want string }{
		{"api", `{"from":"v1","to":"a3"}`, `plan.to: cluster \"a3\" is not a cluster of route \"api\" on gateway gw0`},
		{"api", `{"from":"v0","to":"v2"}`, `plan.from: cluster \"v0\" is not a cluster of route \"api\" on gateway gw1`},
		{"web", `{"from":"v1","to":"v2"}`, `plan.route: \"web\" is not a route of gateway gw0`},
	} {
		code, b := r.call("POST", "/v1/admin/rollouts/"+c.route, `{"action":"start","plan":`+c.plan+`}`)
		if code != 400 || !strings.Contains(string(b), c.want) {
			t.Errorf("start %s %s: %d %s, want 400 with %s", c.route, c.plan, code, b, c.want)
		}
		if code, b := r.call("GET", "/v1/admin/rollouts/"+c.route, ""); code != 404 {
			t.Errorf("after a refused start of %s: GET %d %s, want 404", c.route, code, b)
		}
	}
	if code, b := r.call("PUT", "/v1/admin/docs/release/api", `{"plan":{"route":"api","from":"v1","to":"a3"},"id":"1","status":"running"}`); code != 400 {
		t.Errorf("PUT release/api through the documents API: %d %s, want 400", code, b)
	}
	st := r.post(`{"action":"start","plan":{"from":"v1","to":"v2"}}`)
	if len(st.Warnings) != 0 || st.Rollout.Plan.To != "v2" {
		t.Fatalf("a plan both gateways can run: %+v", st)
	}
}

// The drain before the canary: a request in flight on B when the rollout
// starts completes (not cut), B takes no request of the route until every
// gateway reported it idle, and no request fails through the whole move
// (drain, canary, abort) under 500 req/s.
func TestReleaseDrainWaitsForInFlight(t *testing.T) {
	r := newReleaseRig(t, 0, 0, 0)
	heldDone := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + r.gws[0].Addrs().Plain + "/direct/hold")
		if err != nil {
			heldDone <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		heldDone <- fmt.Sprintf("%d %s", resp.StatusCode, b)
	}()
	<-r.held // in flight on v2 at gw0
	stop := make(chan struct{})
	var res loadResult
	wg := r.load(stop, 500, 1000, &res)
	defer func() { close(stop); wg.Wait() }()
	started := time.Now()
	st := r.post(`{"action":"start",` + fmt.Sprintf(releasePlan, canaries(50)) + `,"reason":"e2e drain"}`)
	if !st.Rollout.Draining {
		t.Fatalf("started %+v: not draining", st.Rollout)
	}
	// gw0 reports the held request in flight on B: the drain waits
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for ev := range r.store.Watch(ctx, release.CountsKey("api", "gw0"), 1) {
		var c release.StepCounts
		if json.Unmarshal(ev.Doc.Value, &c) == nil && c.ID == st.Rollout.ID && c.Draining && c.InFlightB == 1 {
			break
		}
	}
	if ctx.Err() != nil {
		t.Fatal("gw0 never reported the held request in flight on B")
	}
	code, b := r.call("GET", "/v1/admin/rollouts/api", "")
	var g control.RolloutStatus
	json.Unmarshal(b, &g)
	if code != 200 || !g.Rollout.Draining || !strings.Contains(g.Verdict.Reason, "gw0 (1 in flight)") {
		t.Fatalf("while a request is in flight on B: %d %s", code, b)
	}
	released := time.Now()
	close(r.hold)
	if got := <-heldDone; got != "200 v2 held" {
		t.Fatalf("the request in flight on B when the rollout started: %s, want 200 v2 held", got)
	}
	ro, _ := r.waitRollout(30*time.Second, func(ro release.Rollout) bool { return ro.ID == st.Rollout.ID && !ro.Draining })
	drained := time.Now()
	if ro.Status != release.Running || ro.Reason != "drained: v2 idle on every gateway (2: gw0, gw1)" {
		t.Fatalf("after the drain: %s %q", ro.Status, ro.Reason)
	}
	if first := r.bRouteFirst.Load(); first != 0 && first < released.UnixNano() {
		t.Fatalf("B took a request of the route %v before the held one was released, during the drain", time.Duration(released.UnixNano()-first))
	}
	// the canary takes traffic, then an operator's abort moves it back
	select {
	case <-r.b200:
	case <-time.After(30 * time.Second):
		t.Fatalf("B served %d requests in 30 s of canary", r.bServed.Load())
	}
	r.post(`{"action":"abort","reason":"e2e drain done"}`)
	_, d := r.waitRollout(10*time.Second, func(ro release.Rollout) bool { return ro.ID == st.Rollout.ID && ro.Status == release.Aborted })
	r.waitGateways(d.Revision)
	t.Logf("drain held %v by the request in flight, over %v after its release; %d requests sent, %d failed, %d served by v2",
		released.Sub(started).Round(100*time.Millisecond), drained.Sub(released).Round(100*time.Millisecond), res.sent.Load(), res.failed.Load(), res.onB.Load())
	if res.failed.Load() != 0 {
		t.Fatalf("%d requests failed while the rollout drained B, moved tenants to it and back", res.failed.Load())
	}
	// the audit log has the rollout's decisions, not the gateways' counts
	code, b = r.call("GET", "/v1/admin/audit?limit=10000", "")
	var audit []struct{ Key, Reason string }
	if err := json.Unmarshal(b, &audit); code != 200 || err != nil {
		t.Fatalf("audit: %d %s", code, b)
	}
	var rollout []string
	for _, e := range audit {
		if strings.HasPrefix(e.Key, release.CountsPrefix) {
			t.Fatalf("the gateways' counts are in the audit log: %+v", e)
		}
		if e.Key == release.KeyPrefix+"api" {
			rollout = append(rollout, e.Reason)
		}
	}
	if len(rollout) < 3 { // start, the drain's end, the abort
		t.Fatalf("rollout entries in the audit log: %q", rollout)
	}
}
