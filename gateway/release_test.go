package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/release"
	"github.com/veerhq/veer/slo"
	"github.com/veerhq/veer/store"
	"github.com/veerhq/veer/store/storebolt"
)

const releaseYAML = `admin: {addr: '127.0.0.1:0', token: tok}
routes: [{name: api, try_timeout: 2s, clusters: [{name: v3}, {name: v1}, {name: v2}]}]
clusters:
  - {name: v1, backends: [{address: V1}]}
  - {name: v2, backends: [{address: V2}]}
  - {name: v3, backends: [{address: V3}]}
`

// versionUpstream answers its name; v2 fails 500 when X-Fail is set, every
// version answers 404 under /missing and is slow (over the plan's 300 ms
// threshold) when X-Slow is set.
func versionUpstream(t *testing.T, name string) string {
	return upstream(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/missing":
			http.NotFound(w, r)
			return
		case name == "v2" && r.Header.Get("X-Fail") != "":
			http.Error(w, "v2 broken", http.StatusInternalServerError)
			return
		case r.Header.Get("X-Slow") != "":
			time.Sleep(350 * time.Millisecond) // the answer's latency, not a wait for an event
		}
		_, _ = io.WriteString(w, name)
	})
}

// A real gateway follows a real store's release documents step by step:
// each tenant is served by the version Rollout.Assign names (never v3, the
// route's first cluster, while a document is present), by one version for
// the whole step, and the counts the gateway keeps, shows on
// /admin/release and publishes under release-counts/ are the requests each
// version answered.
func TestReleaseFollowsRollout(t *testing.T) {
	cfg := parseConfig(t, fill(releaseYAML, "V1", versionUpstream(t, "v1"), "V2", versionUpstream(t, "v2"), "V3", versionUpstream(t, "v3")))
	g, base := startGatewayCfg(t, cfg)
	st, err := storebolt.Open(filepath.Join(t.TempDir(), "store.db"), storebolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx, cancel := context.WithCancel(context.Background())
	clk := clock.NewManual(time.Unix(1000, 0))
	applied := make(chan int64, 16)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		g.FollowStore(ctx, st, StoreOptions{Clock: clk, Name: "gw1", OnRelease: func(rev int64) { applied <- rev }})
	}()
	defer wg.Wait()
	defer cancel()
	counts := st.Watch(ctx, release.CountsPrefix, 1)
	<-applied // the first (empty) list

	// The gateway counts an answer slow when it took over the plan's
	// threshold from the request's start in the gateway to its answer's
	// header: never longer than the client waited (took). An answer the
	// client had within the threshold is not slow; one the backend held
	// for 350 ms (X-Slow) is; one the client waited longer for on a busy
	// machine may be either, and is counted in mayBeSlow.
	const slowAt = 300 * time.Millisecond
	var took time.Duration // the last get's, from sending the request to reading the answer
	get := func(tenant string, hdr ...string) (string, int) {
		t.Helper()
		start := time.Now()
		defer func() { took = time.Since(start) }()
		req, _ := http.NewRequest("GET", base+"/", nil)
		if tenant != "" {
			req.Header.Set(DefaultTenantHeader, tenant)
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
			if hdr[i] == "path" {
				req.URL.Path = hdr[i+1]
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b), resp.StatusCode
	}
	put := func(r release.Rollout) {
		t.Helper()
		b, _ := json.Marshal(r)
		d, err := st.Put(ctx, release.KeyPrefix+"api", b, store.Write{})
		if err != nil {
			t.Fatal(err)
		}
		for rev := <-applied; rev < d.Revision; rev = <-applied {
		}
	}
	tenants := []string{"", "acme"}
	for i := range 200 {
		tenants = append(tenants, fmt.Sprintf("t%d", i))
	}

	plan := release.Plan{Route: "api", From: "v1", To: "v2", CanaryTenants: []string{"acme"}, SLO: release.SLO{SlowThreshold: slowAt}}
	ro, err := release.Start(plan, clk.Now(), "test")
	if err != nil {
		t.Fatal(err)
	}
	// the drain: every tenant on A, B's cluster drained, the counts say so
	v2Drained := func() bool {
		for _, c := range g.State().Clusters {
			if c.Name == "v2" {
				return c.Drained
			}
		}
		t.Fatal("no cluster v2")
		return false
	}
	put(ro)
	var drainMayBeSlow int64
	for _, tn := range tenants[:20] {
		if got, _ := get(tn); got != "v1" {
			t.Fatalf("draining: tenant %q on %q", tn, got)
		}
		if took > slowAt {
			drainMayBeSlow++
		}
	}
	if rs := g.Releases(); len(rs) != 1 || !rs[0].Draining || rs[0].Step != -1 || !v2Drained() {
		t.Fatalf("draining: Releases() = %+v, v2 drained %v", rs, v2Drained())
	}
	// the publisher's ticker, made on its own goroutine, is on the clock
	// before the clock moves (else the tick is missed and no counts come)
	for deadline := time.Now().Add(10 * time.Second); clk.Pending() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no counts ticker on the clock after 10 s")
		}
	}
	clk.Advance(DefaultCountsInterval)
	drainSlow := int64(-1)
	for ev := range counts {
		var sc release.StepCounts
		if err := json.Unmarshal(ev.Doc.Value, &sc); err != nil {
			t.Fatal(err)
		}
		if sc.ID == ro.ID && sc.Draining && sc.Step == -1 && sc.InFlightB == 0 && sc.A.Requests == 20 {
			drainSlow = sc.A.Slow
			break
		}
	}
	if drainSlow < 0 || drainSlow > drainMayBeSlow {
		t.Fatalf("draining: %d slow answers, want 0 to %d (those the client waited over %v for)", drainSlow, drainMayBeSlow, slowAt)
	}
	if st := testutil.ToFloat64(g.m.relStep.WithLabelValues("api")); st != -1 || testutil.ToFloat64(g.m.relStatus.WithLabelValues("api", "draining")) != 1 {
		t.Fatalf("draining: step_state %v, status_state{draining} %v", st, testutil.ToFloat64(g.m.relStatus.WithLabelValues("api", "draining")))
	}
	total := [2]release.Counts{{Requests: 20, Slow: drainSlow}} // the drain's 20 on A
	ro = ro.EndDrain(clk.Now(), "idle")
	for step := range plan.Steps() {
		ro.Step = step
		put(ro)
		if v2Drained() {
			t.Fatalf("step %d: v2 still drained", step)
		}
		var want [2]release.Counts
		var mayBeSlow [2]int64
		for _, tn := range tenants {
			v := ro.Assign(tn)
			name := map[release.Version]string{release.A: "v1", release.B: "v2"}[v]
			for range 2 { // the same version twice within the step
				if got, code := get(tn); got != name || code != 200 {
					t.Fatalf("step %d tenant %q: %d %q, want %q", step, tn, code, got, name)
				}
				want[v].Requests++
				if took > slowAt {
					mayBeSlow[v]++
				}
			}
		}
		// errors, slow answers and uncounted 404s on each version
		for _, tn := range []string{"acme", "t7"} {
			v := ro.Assign(tn)
			_, code := get(tn, "X-Fail", "1")
			want[v].Requests++
			if took > slowAt {
				mayBeSlow[v]++
			}
			if (code == 500) != (v == release.B) {
				t.Fatalf("step %d tenant %q on %v: X-Fail answered %d", step, tn, v, code)
			}
			if code == 500 {
				want[v].Errors++
			}
			if _, code := get(tn, "path", "/missing"); code != 404 {
				t.Fatalf("step %d: /missing = %d", step, code)
			}
		}
		if step == 0 {
			get("t7", "X-Slow", "1")
			want[ro.Assign("t7")].Requests++
			want[ro.Assign("t7")].Slow++
		}
		// the slow answers: those wanted, and of the others at most those
		// the client waited over the threshold for; the counts compared
		// below have that number
		if rs := g.Releases(); len(rs) == 1 {
			for _, v := range []release.Version{release.A, release.B} {
				got := map[release.Version]int64{release.A: rs[0].A.Slow, release.B: rs[0].B.Slow}[v]
				if got < want[v].Slow || got > want[v].Slow+mayBeSlow[v] {
					t.Fatalf("step %d: %d slow answers on %v, want %d (X-Slow) to %d (with those the client waited over %v for)", step, got, v, want[v].Slow, want[v].Slow+mayBeSlow[v], slowAt)
				}
				if mayBeSlow[v] > 0 {
					t.Logf("step %d: the client waited over %v for %d answers on %v; the gateway counted %d slow, %d wanted", step, slowAt, mayBeSlow[v], v, got, want[v].Slow)
				}
				want[v].Slow = got
			}
		}

		// the metrics: cumulative over the steps, by version; the step applied
		for _, v := range []release.Version{release.A, release.B} {
			total[v] = total[v].Add(want[v]) // want has no latencies
			got := release.Counts{
				Requests: int64(testutil.ToFloat64(g.m.relRequests.WithLabelValues("api", v.String()))),
				Errors:   int64(testutil.ToFloat64(g.m.relErrors.WithLabelValues("api", v.String()))),
				Slow:     int64(testutil.ToFloat64(g.m.relSlow.WithLabelValues("api", v.String()))),
			}
			if !reflect.DeepEqual(got, total[v]) {
				t.Fatalf("step %d: veer_gateway_release_*_total{version=%s} = %+v, want %+v", step, v, got, total[v])
			}
		}
		if st := testutil.ToFloat64(g.m.relStep.WithLabelValues("api")); st != float64(step) || testutil.ToFloat64(g.m.relStatus.WithLabelValues("api", "running")) != 1 {
			t.Fatalf("step %d: step_state %v", step, st)
		}
		rs := g.Releases()
		if len(rs) != 1 || rs[0].ID != ro.ID || rs[0].Step != step || !sameCounts(rs[0].A, want[release.A]) || !sameCounts(rs[0].B, want[release.B]) {
			t.Fatalf("step %d: Releases() = %+v, want a %+v b %+v", step, rs, want[release.A], want[release.B])
		}
		var adm []ReleaseStatus
		req, _ := http.NewRequest("GET", "http://"+g.Addrs().Admin+"/admin/release", nil)
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.NewDecoder(resp.Body).Decode(&adm); err != nil || len(adm) != 1 || !reflect.DeepEqual(adm[0], rs[0]) {
			t.Fatalf("step %d: /admin/release = %+v, %v; want %+v", step, adm, err, rs)
		}
		resp.Body.Close()
		clk.Advance(DefaultCountsInterval)
		for ev := range counts {
			var sc release.StepCounts
			if err := json.Unmarshal(ev.Doc.Value, &sc); err != nil {
				t.Fatal(err)
			}
			if ev.Doc.Key != release.CountsKey("api", "gw1") {
				t.Fatalf("counts under %q", ev.Doc.Key)
			}
			if sc.Step == step && sameCounts(sc.A, want[release.A]) && sameCounts(sc.B, want[release.B]) && sc.ID == ro.ID {
				break
			}
			if sc.Step > step {
				t.Fatalf("step %d: published %+v", step, sc)
			}
		}
	}

	// the counts were published every step, none of them into the history
	if h, err := st.History(ctx, release.CountsPrefix, 0); err != nil || len(h) != 0 {
		t.Fatalf("counts in the history (the audit log): %d entries, %v", len(h), err)
	}
	// aborted: every tenant back on v1; deleted: the route's own order (v3)
	ro.Status = release.Aborted
	put(ro)
	for _, tn := range tenants[:20] {
		if got, _ := get(tn); got != "v1" {
			t.Fatalf("aborted: tenant %q on %q", tn, got)
		}
	}
	if err := st.Delete(ctx, release.KeyPrefix+"api", store.Write{}); err != nil {
		t.Fatal(err)
	}
	<-applied
	if got, _ := get("acme"); got != "v3" {
		t.Fatalf("no rollout: acme on %q, want the route's first cluster v3", got)
	}
	if len(g.Releases()) != 0 {
		t.Fatalf("Releases after delete: %+v", g.Releases())
	}
}

// A release document that does not decode or validate leaves the route's
// rollout as it was.
func TestReleaseDocumentRejected(t *testing.T) {
	cfg := parseConfig(t, fill(releaseYAML, "V1", "127.0.0.1:1", "V2", "127.0.0.1:1", "V3", "127.0.0.1:1"))
	g, _ := startGatewayCfg(t, cfg)
	ro, _ := release.Start(release.Plan{Route: "api", From: "v1", To: "v2"}, time.Unix(1, 0), "t")
	good, _ := json.Marshal(ro)
	seen := map[string]int64{}
	doc := func(rev int64, v string) *store.Snapshot {
		return snap(store.Doc{Key: release.KeyPrefix + "api", Value: []byte(v), Version: rev, Revision: rev})
	}
	g.applyReleases(doc(1, string(good)), seen)
	for i, bad := range []string{"{", strings.Replace(string(good), `"to":"v2"`, `"to":"v1"`, 1), strings.Replace(string(good), `"route":"api"`, `"route":"web"`, 1)} {
		g.applyReleases(doc(int64(2+i), bad), seen)
		if rs := g.Releases(); len(rs) != 1 || rs[0].ID != ro.ID {
			t.Fatalf("bad document %d: %+v", i, rs)
		}
	}
	if n := g.storeCount(release.KeyPrefix, "invalid"); n != 3 {
		t.Fatalf("invalid count %d, want 3", n)
	}
}

// The drain a rollout makes is undone when it ends, the rollout is aborted
// or its document is deleted; a cluster an operator drained stays drained.
func TestReleaseDrainUndone(t *testing.T) {
	cfg := parseConfig(t, fill(releaseYAML, "V1", "127.0.0.1:1", "V2", "127.0.0.1:1", "V3", "127.0.0.1:1"))
	g, _ := startGatewayCfg(t, cfg)
	drained := func(name string) bool {
		for _, c := range g.State().Clusters {
			if c.Name == name {
				return c.Drained
			}
		}
		return false
	}
	ro, _ := release.Start(release.Plan{Route: "api", From: "v1", To: "v2"}, time.Unix(1, 0), "t")
	seen := map[string]int64{}
	rev := int64(0)
	apply := func(r *release.Rollout) {
		rev++
		sn := snap()
		if r != nil {
			b, _ := json.Marshal(r)
			sn = snap(store.Doc{Key: release.KeyPrefix + "api", Value: b, Version: rev, Revision: rev})
		}
		g.applyReleases(sn, seen)
	}
	aborted, _ := ro.Do(release.Cancel, time.Unix(2, 0), "no")
	ended := ro.EndDrain(time.Unix(2, 0), "idle")
	for _, c := range []struct {
		name string
		r    *release.Rollout
		want bool
	}{
		{"draining", &ro, true},
		{"drain over", &ended, false},
		{"draining again (a new rollout)", &ro, true},
		{"aborted while draining", &aborted, false},
		{"draining", &ro, true},
		{"document deleted", nil, false},
	} {
		apply(c.r)
		if drained("v2") != c.want {
			t.Fatalf("%s: v2 drained %v, want %v", c.name, drained("v2"), c.want)
		}
	}
	// an operator's drain is not the rollout's to undo
	if err := g.Drain("v2", "", true); err != nil {
		t.Fatal(err)
	}
	apply(&ro)
	apply(&ended)
	if !drained("v2") {
		t.Fatal("the rollout undid an operator's drain")
	}
}

// sameCounts compares got with want's requests, errors and slow answers,
// and got's latency histogram with its requests: one latency a request.
func sameCounts(got, want release.Counts) bool {
	var n int64
	for _, v := range got.Latency {
		n += v
	}
	if n != got.Requests || (got.Requests > 0) != (len(got.Latency) == release.LatencyBuckets) {
		return false
	}
	got.Latency = nil
	return reflect.DeepEqual(got, want)
}

// The dashboard's rollout panels (slo.GatewayPanels) read metrics the
// gateway exports while it applies a rollout.
func TestDashboardReleaseMetricsExist(t *testing.T) {
	cfg := parseConfig(t, fill(releaseYAML, "V1", versionUpstream(t, "v1"), "V2", versionUpstream(t, "v2"), "V3", versionUpstream(t, "v3")))
	reg := prometheus.NewRegistry()
	g := startGatewayOpts(t, cfg, Options{Registerer: reg, Gatherer: reg})
	ro, _ := release.Start(release.Plan{Route: "api", From: "v1", To: "v2", BlueGreen: true, NoDrain: true}, time.Unix(1, 0), "t")
	b, _ := json.Marshal(ro)
	g.applyReleases(snap(store.Doc{Key: release.KeyPrefix + "api", Value: b, Version: 1, Revision: 1}), map[string]int64{})
	resp, err := http.Get("http://" + g.Addrs().Plain + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, mf := range mfs {
		have[mf.GetName()] = true
	}
	name := regexp.MustCompile(`veer_gateway_release_\w+`)
	n := 0
	for _, p := range slo.GatewayPanels {
		for _, q := range p.Queries {
			for _, m := range name.FindAllString(q.Expr, -1) {
				n++
				if !have[m] {
					t.Errorf("panel %q reads %s, which the gateway does not export", p.Title, m)
				}
			}
		}
	}
	if n < 5 {
		t.Fatalf("the dashboard reads %d release metrics, want the step, the status and the counts", n)
	}
	for _, err := range obs.Lint(reg) {
		t.Error(err)
	}
}
