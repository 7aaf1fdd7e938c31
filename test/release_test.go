package test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
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
}

const releaseGatewayYAML = `
listen: {addr: 'off', plain: '127.0.0.1:0'}
retry: {disabled: true}
routes: [{name: api, try_timeout: 5s, clusters: [{name: v1}, {name: v2}]}]
clusters:
  - {name: v1, backends: [{address: '%V1%'}]}
  - {name: v2, backends: [{address: '%V2%'}]}
`

func newReleaseRig(t *testing.T, failRate float64, aDelay, bDelay time.Duration) *releaseRig {
	r := &releaseRig{t: t, failRate: failRate, aDelay: aDelay, bDelay: bDelay}
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
	v2 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		r.bFirst.CompareAndSwap(0, time.Now().UnixNano())
		r.bServed.Add(1)
		if r.bDelay > 0 {
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
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.FollowStore(ctx, st, gateway.StoreOptions{Name: fmt.Sprintf("gw%d", i), Backoff: 50 * time.Millisecond,
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
	return r
}

func (r *releaseRig) post(body string) control.RolloutStatus {
	r.t.Helper()
	req, _ := http.NewRequest("POST", r.admin+"/v1/admin/rollouts/api", bytes.NewReader([]byte(body)))
	req.Header.Set("Authorization", "Bearer "+r.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		r.t.Fatalf("POST rollout: %d %s", resp.StatusCode, b)
	}
	var s control.RolloutStatus
	json.Unmarshal(b, &s)
	return s
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
		t.Logf("verdict: %s: B %+v A %+v", v.Decision, v.B, v.A)
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
func TestReleaseBadAborted(t *testing.T) { testReleaseAborted(t, newReleaseRig(t, 0.05, 0, 0), "") }

// A B answering in 3× A's time (30 ms against 10 ms; slow_threshold 20 ms,
// near A's p99) is aborted within 60 s of its first request, then every
// tenant is on A.
func TestReleaseSlowAborted(t *testing.T) {
	testReleaseAborted(t, newReleaseRig(t, 0, 10*time.Millisecond, 30*time.Millisecond), `"slow_threshold":"20ms"`)
}

func testReleaseAborted(t *testing.T, r *releaseRig, slo string) {
	within := 30 * time.Second
	plan := fmt.Sprintf(releasePlan, canaries(50))
	if slo != "" {
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
}
