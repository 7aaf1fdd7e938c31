package up

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/veerhq/veer/async"
	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/gateway"
)

func TestAsyncConfigValidate(t *testing.T) {
	cases := []struct {
		cfg   AsyncConfig
		field string
	}{
		{AsyncConfig{Rate: -1}, "async.rate"},
		{AsyncConfig{Workers: -1}, "async.workers"},
		{AsyncConfig{NATS: "http://x:4222"}, "async.nats"},
		{AsyncConfig{NATS: "local", Ephemeral: true}, "async.ephemeral"},
	}
	for _, c := range cases {
		cfg := Config{Async: c.cfg}
		err := cfg.Validate()
		if f := config.Fields(err); len(f) != 1 || f[0] != c.field {
			t.Errorf("%+v: fields %v (%v), want [%s]", c.cfg, f, err, c.field)
		}
	}
	for _, ok := range []AsyncConfig{{}, {NATS: "local"}, {NATS: "nats://10.0.0.1:4222, nats://10.0.0.2:4222"}, {Ephemeral: true}} {
		cfg := Config{Async: ok}
		if err := cfg.Validate(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
	if got := (AsyncConfig{NATS: "nats://a:1, nats://b:2,"}).natsURLs(); !slices.Equal(got, []string{"nats://a:1", "nats://b:2"}) {
		t.Errorf("natsURLs %v", got)
	}
	if got := (AsyncConfig{NATS: NATSLocal}).natsURLs(); got != nil {
		t.Errorf("local: natsURLs %v", got)
	}
}

func TestRunLogRing(t *testing.T) {
	l := newRunLog(3)
	if r := l.since(0); r.Last != 0 || len(r.Runs) != 0 || r.Truncated || r.Boot == "" {
		t.Fatalf("empty: %+v", r)
	}
	for i := 1; i <= 5; i++ {
		l.add(fmt.Sprintf("id%d", i), fmt.Sprintf("k%d", i))
	}
	ids := func(r Runs) (out []string) {
		for _, x := range r.Runs {
			out = append(out, x.ID)
		}
		return out
	}
	steps := []struct {
		after     uint64
		want      []string
		truncated bool
	}{
		{0, []string{"id3", "id4", "id5"}, true}, // 1 and 2 forgotten
		{1, []string{"id3", "id4", "id5"}, true},
		{2, []string{"id3", "id4", "id5"}, false},
		{3, []string{"id4", "id5"}, false},
		{5, nil, false},
		{99, nil, false},
	}
	for _, s := range steps {
		r := l.since(s.after)
		if got := ids(r); !slices.Equal(got, s.want) || r.Truncated != s.truncated || r.Last != 5 {
			t.Errorf("after %d: %v truncated %v last %d, want %v truncated %v", s.after, got, r.Truncated, r.Last, s.want, s.truncated)
		}
	}
	if r := l.since(3); r.Runs[0].Seq != 4 || r.Runs[0].Key != "k4" {
		t.Errorf("run 4: %+v", r.Runs[0])
	}
}

func TestTallyAsync(t *testing.T) {
	res := AsyncBurstResult{Nonce: "n1", Accepted: 3,
		IDs:        map[string]string{"chaos-n1-0": "i0", "chaos-n1-1": "i1", "chaos-n1-2": "i2"},
		GaveUpKeys: []string{"chaos-n1-3"}}
	run := func(id, key string) Run { return Run{ID: id, Key: key} }
	cases := []struct {
		name                  string
		runs                  []Run
		ran, twice, lost, bad int
		gaveUpRan             int
	}{
		{"all ran once", []Run{run("i0", "chaos-n1-0"), run("i1", "chaos-n1-1"), run("i2", "chaos-n1-2")}, 3, 0, 0, 0, 0},
		{"one lost", []Run{run("i0", "chaos-n1-0"), run("i2", "chaos-n1-2")}, 2, 0, 1, 0, 0},
		{"one ran twice under its key", []Run{run("i0", "chaos-n1-0"), run("i0", "chaos-n1-0"), run("i1", "chaos-n1-1"), run("i2", "chaos-n1-2")}, 3, 1, 0, 0, 0},
		{"an id under another key", []Run{run("i0", "chaos-n1-1"), run("i1", "chaos-n1-1"), run("i2", "chaos-n1-2")}, 3, 0, 0, 1, 0},
		{"a second id for a key", []Run{run("i0", "chaos-n1-0"), run("x9", "chaos-n1-0"), run("i1", "chaos-n1-1"), run("i2", "chaos-n1-2")}, 3, 0, 0, 1, 0},
		{"a submission without a 202 ran", []Run{run("i0", "chaos-n1-0"), run("i1", "chaos-n1-1"), run("i2", "chaos-n1-2"), run("i3", "chaos-n1-3")}, 3, 0, 0, 0, 1},
		{"other submitters' runs ignored", []Run{run("i0", "chaos-n1-0"), run("i1", "chaos-n1-1"), run("i2", "chaos-n1-2"), run("s1", "up-a-x-1"), run("c1", "chaos-n2-0")}, 3, 0, 0, 0, 0},
	}
	for _, c := range cases {
		got := tallyAsync(res, c.runs)
		if got.ran != c.ran || got.twice != c.twice || got.lost != c.lost || len(got.violations) != c.bad || got.gaveUpRan != c.gaveUpRan {
			t.Errorf("%s: ran %d twice %d lost %d violations %v gave-up ran %d; want %d %d %d %d %d",
				c.name, got.ran, got.twice, got.lost, got.violations, got.gaveUpRan, c.ran, c.twice, c.lost, c.bad, c.gaveUpRan)
		}
	}
}

// A demo backend runs a report and records it by invocation id and key;
// GET PathRuns answers the runs after a sequence number.
func TestBackendRecordsReports(t *testing.T) {
	srv := httptest.NewServer(BackendHandler("a1", "a1-1", BackendConfig{CPU: time.Microsecond, Report: time.Millisecond}))
	defer srv.Close()
	for i := range 2 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+PathReports, strings.NewReader(`{}`))
		req.Header.Set(async.IDHeader, fmt.Sprintf("inv-%d", i))
		req.Header.Set(async.KeyHeader, fmt.Sprintf("key-%d", i))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get(HeaderCluster) != "a1" {
			t.Fatalf("report: %s, cluster %q", resp.Status, resp.Header.Get(HeaderCluster))
		}
	}
	get := func(q string) (int, Runs) {
		resp, err := http.Get(srv.URL + PathRuns + q)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r Runs
		_ = json.NewDecoder(resp.Body).Decode(&r)
		return resp.StatusCode, r
	}
	code, r := get("?after=1")
	if code != http.StatusOK || r.Last != 2 || len(r.Runs) != 1 || r.Runs[0] != (Run{Seq: 2, ID: "inv-1", Key: "key-1"}) {
		t.Fatalf("after=1: %d %+v", code, r)
	}
	if code, r = get(""); code != http.StatusOK || len(r.Runs) != 2 {
		t.Fatalf("all: %d %+v", code, r)
	}
	for _, q := range []string{"?after=x", "?after=-1"} {
		if code, _ := get(q); code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", q, code)
		}
	}
}

// POST /v1/fault/async's parser: any query gets 400 or 503 from a system
// not running, never a panic or a burst.
func FuzzAsyncBurstQuery(f *testing.F) {
	for _, q := range []string{"site=a&rate=40&duration=3s", "rate=NaN&duration=1s", "rate=1e309&duration=-1s", "site=c&rate=1&duration=1s", "rate=5&duration=1s&deadline=x", "rate=5&duration=1s&deadline=11m"} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, q string) {
		s := &System{}
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/v1/fault/async", nil)
		r.URL.RawQuery = q
		s.handleAsyncBurst(w, r)
		if w.Code != http.StatusBadRequest && w.Code != http.StatusServiceUnavailable {
			t.Fatalf("%q: status %d", q, w.Code)
		}
	})
}

// The release scenarios are skipped, with the reason, on a system whose
// control store the gateways cannot follow; a skip prints as SKIP.
func TestReleaseScenariosNeedEtcd(t *testing.T) {
	for _, name := range []string{"bad-release", "good-release"} {
		sc, ok := Lookup(name)
		if !ok || sc.skip == nil || !sc.childrenOnly {
			t.Fatalf("%s: %+v", name, sc)
		}
		if why := sc.skip(State{}); !strings.Contains(why, "etcd") {
			t.Errorf("%s on the embedded store: needs %q", name, why)
		}
		if why := sc.skip(State{ControlStore: []string{"http://127.0.0.1:2379"}}); why != "" {
			t.Errorf("%s on etcd: needs %q", name, why)
		}
	}
	r := Result{Name: "bad-release", Seed: "003", Skipped: "needs etcd"}
	if got := r.String(); got != "SKIPPED bad-release (seed 003): needs etcd\n" {
		t.Errorf("String: %q", got)
	}
}

// After a sweep, allOn holds only when every tenant was answered by the
// cluster at both gateways and nothing came from elsewhere.
func TestAllOn(t *testing.T) {
	every := func(cluster string) map[string]ClusterCounts {
		tn := map[string]int64{}
		for i := range releaseTenants {
			tn[releaseTenant(i)] = 1
		}
		return map[string]ClusterCounts{cluster: {OK: releaseTenants, Tenants: tn}}
	}
	good := ReleaseLoad{Sites: map[string]map[string]ClusterCounts{"a": every("a1"), "b": every("a1")}}
	if ok, why := allOn(good, "a1"); !ok {
		t.Errorf("all on a1: %s", why)
	}
	if ok, _ := allOn(good, "a2"); ok {
		t.Error("all on a2 too")
	}
	stray := ReleaseLoad{Sites: map[string]map[string]ClusterCounts{"a": every("a1"), "b": every("a1")}}
	stray.Sites["b"]["a2"] = ClusterCounts{OK: 1, Tenants: map[string]int64{"tenant-003": 1}}
	if ok, _ := allOn(stray, "a1"); ok {
		t.Error("an answer from a2 at gateway b passed")
	}
	// sub: a later reading minus an earlier one, per tenant too
	d := good.sub(ReleaseLoad{Sites: map[string]map[string]ClusterCounts{"a": every("a1")}})
	if n := len(d.Sites["a"]["a1"].Tenants); n != 0 || d.Sites["b"]["a1"].OK != releaseTenants {
		t.Errorf("sub: %d tenants left at a, %d ok at b", n, d.Sites["b"]["a1"].OK)
	}
}

// A bad version fails the same numbered requests on every backend, at
// about its share, and none when healthy.
func TestBadVersionDeterministic(t *testing.T) {
	n := 0
	for i := range 10000 {
		k := fmt.Sprint(i)
		first := failed(k, 0.05)
		for range 3 { // every backend decides alike
			if failed(k, 0.05) != first {
				t.Fatalf("request %s: not deterministic", k)
			}
		}
		if first {
			n++
		}
		if failed(k, 0) {
			t.Fatalf("request %s failed with share 0", k)
		}
	}
	if n < 400 || n > 600 {
		t.Errorf("%d of 10000 failed at 5%%", n)
	}
}

// The profile service's version switch: bad input 400; errors=1 fails
// every request with 500; back to healthy with errors=0.
func TestBackendVersionSwitch(t *testing.T) {
	srv := httptest.NewServer(BackendHandler("a2", "a2-1", BackendConfig{CPU: time.Microsecond, Latency: time.Millisecond}))
	defer srv.Close()
	post := func(q string) int {
		resp, err := http.Post(srv.URL+PathFault+q, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	profile := func() int {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+PathProfile, nil)
		req.Header.Set(headerRequest, "7")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, q := range []string{"?errors=2", "?errors=-0.1", "?errors=x", "?slow=0.5", "?slow=1000", "?slow=NaN"} {
		if code := post(q); code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", q, code)
		}
	}
	steps := []struct {
		q    string
		want int
	}{{"?errors=1", 500}, {"?errors=0&slow=2", 200}, {"", 200}}
	for _, s := range steps {
		if code := post(s.q); code != http.StatusNoContent {
			t.Fatalf("%s: %d", s.q, code)
		}
		if got := profile(); got != s.want {
			t.Errorf("after %s: profile %d, want %d", s.q, got, s.want)
		}
	}
}

// The gateway config veer up writes parses and validates as a gateway's:
// the async route and section, the release route over a1 and a2 at both
// sites, and control_store (with the store's prefix) when control is on
// etcd; none without.
func TestGatewayYAMLParses(t *testing.T) {
	backends := map[string][]string{"a1": {"127.0.0.1:1", "127.0.0.1:2"}, "a2": {"127.0.0.1:3"}, "b1": {"127.0.0.1:4"}}
	for _, etcd := range [][]string{nil, {"http://127.0.0.1:2379"}} {
		for _, nats := range []string{"", "nats://127.0.0.1:4222"} {
			s := &System{cfg: Config{Async: AsyncConfig{NATS: nats}}.withDefaults(), engines: Engines{Store: strings.Join(etcd, ",")}, state: State{Token: "t"}}
			y := s.gatewayYAML(siteBIP, 4443, "127.0.0.1:9000", t.TempDir(), "c.pem", "k.pem", []string{"b1"}, backends)
			var gc gateway.Config
			if err := config.Parse([]byte(y), "gateway.yaml", &gc); err != nil {
				t.Fatalf("etcd %v nats %q: %v\n%s", etcd, nats, err, y)
			}
			if err := gc.Validate(); err != nil {
				t.Fatalf("etcd %v nats %q: %v\n%s", etcd, nats, err, y)
			}
			if got := slices.Equal(gc.ControlStore.Endpoints, etcd); !got {
				t.Errorf("control_store %v, want %v", gc.ControlStore.Endpoints, etcd)
			}
			if want := map[string]string{"": "embedded", "nats://127.0.0.1:4222": "external"}[nats]; gc.Async.Engine != want {
				t.Errorf("async.engine %q, want %q", gc.Async.Engine, want)
			}
			var async, profile bool
			for _, r := range gc.Routes {
				async = async || r.Name == "reports" && r.Async
				if r.Name == releaseRoute {
					profile = len(r.Clusters) == 2 && r.Clusters[0].Name == releaseFrom && r.Clusters[1].Name == releaseTo
				}
			}
			if !async || !profile {
				t.Errorf("reports async %v, profile over a1, a2 %v:\n%s", async, profile, y)
			}
		}
	}
}
