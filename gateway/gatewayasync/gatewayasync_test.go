package gatewayasync_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/veerhq/veer/async"
	"github.com/veerhq/veer/async/asyncnats/natstest"
	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/gateway"
	"github.com/veerhq/veer/gateway/gatewayasync"
	"github.com/veerhq/veer/gateway/gatewaytest"
	"github.com/veerhq/veer/internal/metrictest"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/slo"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
}

// seen is what the backend received, by invocation id.
type seen struct {
	mu    sync.Mutex
	count map[string]int
	hdr   map[string]http.Header
	body  map[string]string
}

func backend(t *testing.T) (string, *seen) {
	s := &seen{count: map[string]int{}, hdr: map[string]http.Header{}, body: map[string]string{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		id := r.Header.Get(async.IDHeader)
		s.mu.Lock()
		s.count[id]++
		s.hdr[id] = r.Header.Clone()
		s.body[id] = string(b)
		s.mu.Unlock()
		if r.URL.Path == "/jobs/bad" {
			w.WriteHeader(http.StatusUnprocessableEntity)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String(), s
}

// closedPort is a loopback port nothing listens on: a real refused connect.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

const conf = `
routes:
  - name: jobs
    path_prefix: /jobs
    async: true
    clusters: [{name: dead}, {name: live}]
  - name: sync
    path_prefix: /
    clusters: [{name: live}]
clusters:
  - name: dead
    backends: [{address: %DEAD%}]
  - name: live
    backends: [{address: %LIVE%}]
data_dir: %DIR%
admin: {addr: '127.0.0.1:0', token: secret}
async:
  max_body: 1024
  tenant_key: header:X-Tenant
  %EXTRA%
`

type gw struct {
	g    *gateway.Gateway
	reg  *prometheus.Registry
	url  string
	mu   sync.Mutex
	last map[string]async.Status
	ch   chan struct{}
}

func start(t *testing.T, live, extra string) *gw {
	t.Helper()
	y := strings.NewReplacer("%DEAD%", closedPort(t), "%LIVE%", live, "%DIR%", t.TempDir(), "%EXTRA%", extra).Replace(conf)
	var cfg gateway.Config
	if err := config.Parse([]byte(y), "test.yaml", &cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Listen.Addr, cfg.Listen.Plain = "off", "127.0.0.1:0"
	w := &gw{last: map[string]async.Status{}, ch: make(chan struct{}, 1), reg: prometheus.NewRegistry()}
	g := gatewaytest.Start(t, cfg, gateway.Options{Logger: obs.Discard, Registerer: w.reg,
		AsyncEngine: gatewayasync.Engine(obs.Discard), OnAsyncStatus: func(st async.Status) {
			w.mu.Lock()
			w.last[st.ID] = st
			w.mu.Unlock()
			select {
			case w.ch <- struct{}{}:
			default:
			}
		}})
	w.g, w.url = g, "http://"+g.Addrs().Plain
	return w
}

func (w *gw) wait(t *testing.T, id string, want async.State) async.Status {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		w.mu.Lock()
		st, ok := w.last[id]
		w.mu.Unlock()
		if ok && st.State == want {
			return st
		}
		select {
		case <-w.ch:
		case <-timeout:
			t.Fatalf("%s: %+v, want %s", id, st, want)
		}
	}
}

func do(t *testing.T, method, url, body string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	return resp, string(b)
}

// TestAsyncRoute: 202 with the id and Location only once stored; the
// attempt goes through the gateway's dispatch (the route's first cluster
// refuses the connection, the cross-cluster retry reaches the second)
// with the invocation id and idempotency key upstream; the status API
// answers queued/succeeded with the upstream status; the same key
// returns the same id and runs once.
func TestAsyncRoute(t *testing.T) {
	live, s := backend(t)
	w := start(t, live, "")
	resp, body := do(t, "POST", w.url+"/jobs/run?x=1", "payload", "X-Tenant", "acme", "Idempotency-Key", `"order-7"`)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("submit: %d %s", resp.StatusCode, body)
	}
	var rep struct{ ID, Location string }
	if err := json.Unmarshal([]byte(body), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.ID == "" || resp.Header.Get("Location") != async.StatusPath+rep.ID || rep.Location != resp.Header.Get("Location") {
		t.Fatalf("202 without id/Location: %v %s", resp.Header, body)
	}
	st := w.wait(t, rep.ID, async.Succeeded)
	if st.UpstreamStatus != http.StatusCreated || st.Attempts != 1 {
		t.Fatalf("status %+v", st)
	}
	s.mu.Lock()
	h, b, n := s.hdr[rep.ID], s.body[rep.ID], s.count[rep.ID]
	s.mu.Unlock()
	if n != 1 || b != "payload" || h.Get("Idempotency-Key") != "order-7" || h.Get(async.IDHeader) != rep.ID || h.Get("X-Tenant") != "acme" {
		t.Fatalf("backend saw %d× body %q headers %v", n, b, h)
	}
	// the gateway's dispatch ran it: refused on cluster dead, retried on live
	if n := metrictest.Sum(t, w.reg, "veer_gateway_upstream_attempts_total", map[string]string{"cluster": "dead"}); n < 1 {
		t.Fatalf("%v attempts on the dead cluster: not the gateway's dispatch", n)
	}
	if n := metrictest.Sum(t, w.reg, "veer_async_attempts_total", map[string]string{"group": "general", "outcome": "success"}); n != 1 {
		t.Fatalf("veer_async_attempts_total{outcome=success} = %v", n)
	}
	// status API, as the tenant and as another
	resp, body = do(t, "GET", w.url+rep.Location, "", "X-Tenant", "acme")
	var got async.Status
	_ = json.Unmarshal([]byte(body), &got)
	if resp.StatusCode != 200 || got.State != async.Succeeded || got.UpstreamStatus != 201 {
		t.Fatalf("GET status: %d %s", resp.StatusCode, body)
	}
	if resp, _ := do(t, "GET", w.url+rep.Location, "", "X-Tenant", "other"); resp.StatusCode != 404 {
		t.Fatalf("another tenant's GET: %d, want 404", resp.StatusCode)
	}
	// the same key: the same id, not run again
	resp, body = do(t, "POST", w.url+"/jobs/run", "payload", "X-Tenant", "acme", "Idempotency-Key", "order-7")
	var again struct{ ID string }
	_ = json.Unmarshal([]byte(body), &again)
	if resp.StatusCode != 202 || again.ID != rep.ID {
		t.Fatalf("resubmit: %d %s, want 202 with %s", resp.StatusCode, body, rep.ID)
	}
	// a 4xx upstream fails at once, with its reason
	resp, body = do(t, "POST", w.url+"/jobs/bad", "x", "X-Tenant", "acme")
	_ = json.Unmarshal([]byte(body), &rep)
	if resp.StatusCode != 202 {
		t.Fatalf("submit: %d %s", resp.StatusCode, body)
	}
	st = w.wait(t, rep.ID, async.Failed)
	if st.UpstreamStatus != 422 || st.Attempts != 1 || !strings.Contains(st.Reason, "422") {
		t.Fatalf("4xx status %+v", st)
	}
	// the list
	resp, body = do(t, "GET", w.url+"/v1/invocations?limit=10", "", "X-Tenant", "acme")
	var list struct{ Invocations []async.Status }
	_ = json.Unmarshal([]byte(body), &list)
	if resp.StatusCode != 200 || len(list.Invocations) != 2 {
		t.Fatalf("list: %d %s", resp.StatusCode, body)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.count[again.ID] != 1 {
		t.Fatalf("the keyed invocation ran %d times", s.count[again.ID])
	}
}

// TestPreferRespondAsync: Prefer: respond-async makes a sync route's
// request async; without it the route answers synchronously.
func TestPreferRespondAsync(t *testing.T) {
	live, _ := backend(t)
	w := start(t, live, "")
	if resp, _ := do(t, "POST", w.url+"/other", "x"); resp.StatusCode != 201 {
		t.Fatalf("sync: %d", resp.StatusCode)
	}
	resp, body := do(t, "POST", w.url+"/other", "x", "Prefer", "wait=10, respond-async", "X-Tenant", "t")
	if resp.StatusCode != 202 || resp.Header.Get(async.IDHeader) == "" {
		t.Fatalf("Prefer: respond-async: %d %s", resp.StatusCode, body)
	}
	w.wait(t, resp.Header.Get(async.IDHeader), async.Succeeded)
}

// TestAsyncBadInput: 413 above max_body (nothing stored), 400 for a
// malformed Idempotency-Key or id, 404 for an unknown id.
func TestAsyncBadInput(t *testing.T) {
	live, _ := backend(t)
	w := start(t, live, "")
	tenant := []string{"X-Tenant", "t"}
	big := strings.Repeat("x", 1025)
	if resp, _ := do(t, "POST", w.url+"/jobs/x", big, tenant...); resp.StatusCode != 413 {
		t.Fatalf("oversized: %d, want 413", resp.StatusCode)
	}
	for _, key := range []string{"has space", "", strings.Repeat("k", 256), "\"unterminated", "tab\tkey"} {
		if resp, body := do(t, "POST", w.url+"/jobs/x", "x", "X-Tenant", "t", "Idempotency-Key", key); resp.StatusCode != 400 {
			t.Fatalf("key %q: %d %s, want 400", key, resp.StatusCode, body)
		}
	}
	if resp, _ := do(t, "POST", w.url+"/jobs/x", "x", "X-Tenant", "t", "Idempotency-Key", "a", "Idempotency-Key", "b"); resp.StatusCode != 400 {
		t.Fatalf("two keys: %d, want 400", resp.StatusCode)
	}
	if resp, _ := do(t, "POST", w.url+"/jobs/x", "x", "X-Tenant", "t", async.CallbackHeader, "ftp://x"); resp.StatusCode != 400 {
		t.Fatalf("bad callback: %d, want 400", resp.StatusCode)
	}
	for _, h := range [][]string{{async.DelayHeader, "soon"}, {async.DelayHeader, "-1s"}, {async.DelayHeader, "25h"},
		{async.NotBeforeHeader, "tomorrow"}, {async.DelayHeader, "1s", async.NotBeforeHeader, "2030-01-01T00:00:00Z"}} {
		if resp, body := do(t, "POST", w.url+"/jobs/x", "x", append([]string{"X-Tenant", "t"}, h...)...); resp.StatusCode != 400 {
			t.Fatalf("delay %q: %d %s, want 400", h, resp.StatusCode, body)
		}
	}
	_, body := do(t, "GET", w.url+"/v1/invocations", "", tenant...)
	if !strings.Contains(body, `"invocations":[]`) {
		t.Fatalf("something was stored: %s", body)
	}
	for path, want := range map[string]int{
		"/v1/invocations/99-0123456789abcdef": 404,
		"/v1/invocations/nope":                400,
		"/v1/invocations/1-XYZ":               400,
		"/v1/invocations?limit=0":             400,
		"/v1/invocations?cursor=x":            400,
	} {
		if resp, body := do(t, "GET", w.url+path, "", tenant...); resp.StatusCode != want {
			t.Errorf("GET %s: %d %s, want %d", path, resp.StatusCode, body, want)
		}
	}
	if resp, _ := do(t, "DELETE", w.url+"/v1/invocations/1-0123456789abcdef", "", tenant...); resp.StatusCode != 405 {
		t.Errorf("DELETE: %d, want 405", resp.StatusCode)
	}
}

// TestAsyncStoreUnreachable: with the external nats-server killed, a
// submission gets 503 with Retry-After; after it restarts, 202 again.
func TestAsyncStoreUnreachable(t *testing.T) {
	srv := natstest.Start(t, t.TempDir())
	live, _ := backend(t)
	w := start(t, live, "engine: external\n  urls: ["+srv.URL()+"]\n  submit_timeout: 1s")
	if resp, body := do(t, "POST", w.url+"/jobs/a", "x", "X-Tenant", "t"); resp.StatusCode != 202 {
		t.Fatalf("before: %d %s", resp.StatusCode, body)
	}
	srv.Kill()
	resp, _ := do(t, "POST", w.url+"/jobs/b", "x", "X-Tenant", "t")
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("store down: %d Retry-After %q, want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

// TestAsyncSectionFixed: the async section cannot change at run time.
func TestAsyncSectionFixed(t *testing.T) {
	live, _ := backend(t)
	w := start(t, live, "")
	cfg := w.g.Config()
	cfg.Async.MaxBody = 2048
	err := w.g.Apply(cfg)
	if err == nil || !strings.Contains(err.Error(), "async") {
		t.Fatalf("Apply changing async: %v", err)
	}
}

func admin(t *testing.T, w *gw, method, path string, auth bool) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+w.g.Addrs().Admin+path, nil)
	if auth {
		req.Header.Set("Authorization", "Bearer secret")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestAsyncAdmin: the admin API needs the token; pause holds a tenant's
// invocation (its depth shows in stats and in the metric), purge drops it,
// replay resubmits a dead letter under a new id, which runs.
func TestAsyncAdmin(t *testing.T) {
	live, s := backend(t)
	w := start(t, live, "")
	if code, _ := admin(t, w, "POST", "/admin/async/pause?tenant=p", false); code != 401 {
		t.Fatalf("no token: %d, want 401", code)
	}
	if code, body := admin(t, w, "POST", "/admin/async/pause?tenant=p", true); code != 200 {
		t.Fatalf("pause: %d %s", code, body)
	}
	resp, _ := do(t, "POST", w.url+"/jobs/held", "x", "X-Tenant", "p")
	held := resp.Header.Get(async.IDHeader)
	// packed, it is counted in its ingest pack and then in its tenant's
	// queue; while it moves between them the count may read 2 for a moment
	code, body := admin(t, w, "GET", "/admin/async/stats", true)
	for deadline := time.Now().Add(5 * time.Second); code != 200 || !strings.Contains(body, `"group":"general","depth":1`); {
		if time.Now().After(deadline) {
			t.Fatalf("stats while paused: %d %s", code, body)
		}
		time.Sleep(10 * time.Millisecond) // polling the admin API for the count to settle
		code, body = admin(t, w, "GET", "/admin/async/stats", true)
	}
	if n := metrictest.Sum(t, w.reg, "veer_async_depth_invocations", map[string]string{"group": "general"}); n != 1 {
		t.Fatalf("veer_async_depth_invocations = %v, want 1", n)
	}
	if code, body := admin(t, w, "POST", "/admin/async/purge?tenant=p", true); code != 200 {
		t.Fatalf("purge: %d %s", code, body)
	}
	if code, _ := admin(t, w, "POST", "/admin/async/resume?tenant=p", true); code != 200 {
		t.Fatal("resume")
	}
	if resp, _ := do(t, "GET", w.url+async.StatusPath+held, "", "X-Tenant", "p"); resp.StatusCode != 404 {
		t.Fatalf("purged invocation: %d, want 404", resp.StatusCode)
	}
	// a dead letter, replayed
	resp, _ = do(t, "POST", w.url+"/jobs/bad", "x", "X-Tenant", "acme")
	dead := resp.Header.Get(async.IDHeader)
	w.wait(t, dead, async.Failed)
	code, body = admin(t, w, "POST", "/admin/async/replay?group=general", true)
	var rep struct{ Replayed []string }
	_ = json.Unmarshal([]byte(body), &rep)
	if code != 200 || len(rep.Replayed) != 1 || rep.Replayed[0] == dead {
		t.Fatalf("replay: %d %s", code, body)
	}
	w.wait(t, rep.Replayed[0], async.Failed) // the upstream still answers 422
	s.mu.Lock()
	ran := s.count[rep.Replayed[0]]
	s.mu.Unlock()
	if ran != 1 {
		t.Fatalf("replayed invocation ran %d times", ran)
	}
	// the replay failed again (the upstream still answers 422): the only
	// dead letter now is its own, the first one was removed
	var rep2 struct{ Replayed []string }
	code, body = admin(t, w, "POST", "/admin/async/replay?group=general", true)
	_ = json.Unmarshal([]byte(body), &rep2)
	if code != 200 || len(rep2.Replayed) != 1 {
		t.Fatalf("second replay: %d %s, want the one dead letter of the failed replay", code, body)
	}
	if code, _ := admin(t, w, "POST", "/admin/async/pause?group=nope", true); code != 404 {
		t.Fatalf("unknown group: %d", code)
	}
}

// TestAsyncConfigErrors: a bad async section names file:line: field.
func TestAsyncConfigErrors(t *testing.T) {
	for y, want := range map[string]string{
		"async:\n  engine: kafka\n":                         "test.yaml:2: async.engine",
		"async:\n  engine: external\n":                      "async.urls",
		"async:\n  tenant_key: cookie\n":                    "test.yaml:2: async.tenant_key",
		"async:\n  groups: [{name: 'a b'}]\n":               "async.groups[0].name",
		"async:\n  retention: 1h\n":                         "test.yaml:2: async.retention",
		"async:\n  max_body: -1\n":                          "test.yaml:2: async.max_body",
		"async:\n  idempotency_window: 100h\n":              "async.idempotency_window",
		"async:\n  metric_tenants: 101\n":                   "test.yaml:2: async.metric_tenants",
		"async:\n  max_delay: 70h\n":                        "test.yaml:2: async.max_delay",
		"async:\n  batch: maybe\n":                          "test.yaml:2",
		"async:\n  groups: [{name: retry, tenants: [a]}]\n": "async.groups[0].tenants",
	} {
		base := "routes: [{name: r, async: true, clusters: [{name: c}]}]\nclusters: [{name: c, backends: [{address: '127.0.0.1:1'}]}]\n"
		var cfg gateway.Config
		err := config.Parse([]byte(y+base), "test.yaml", &cfg)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", y, err, want)
		}
	}
}

// TestAsyncCallback: a submission's Veer-Callback URL receives the final
// status once the invocation succeeded.
func TestAsyncCallback(t *testing.T) {
	live, _ := backend(t)
	got := make(chan async.Status, 1)
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var st async.Status
		_ = json.NewDecoder(r.Body).Decode(&st)
		got <- st
	}))
	defer cb.Close()
	w := start(t, live, "")
	resp, body := do(t, "POST", w.url+"/jobs/cb", "x", "X-Tenant", "t", async.CallbackHeader, cb.URL+"/done")
	if resp.StatusCode != 202 {
		t.Fatalf("submit: %d %s", resp.StatusCode, body)
	}
	select {
	case st := <-got:
		if st.ID != resp.Header.Get(async.IDHeader) || st.State != async.Succeeded || st.UpstreamStatus != 201 {
			t.Fatalf("callback got %+v", st)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no callback in 30s")
	}
}

// TestDashboardAsyncMetricsExist: every async metric `veer gateway
// dashboard` reads is exported by a gateway with an async route, with the
// labels the panels group by.
func TestDashboardAsyncMetricsExist(t *testing.T) {
	live, _ := backend(t)
	w := start(t, live, "")
	resp, body := do(t, "POST", w.url+"/jobs/run", "payload", "X-Tenant", "acme")
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("submit: %d %s", resp.StatusCode, body)
	}
	var rep struct{ ID string }
	json.Unmarshal([]byte(body), &rep)
	w.wait(t, rep.ID, async.Succeeded)
	mfs, err := w.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]map[string]bool{}
	for _, mf := range mfs {
		labels[mf.GetName()] = map[string]bool{}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				labels[mf.GetName()][l.GetName()] = true
			}
		}
	}
	name := regexp.MustCompile(`veer_async_\w+`)
	by := regexp.MustCompile(`by \((\w+)\)`)
	n := 0
	for _, p := range slo.GatewayPanels {
		for _, q := range p.Queries {
			for _, m := range name.FindAllString(q.Expr, -1) {
				n++
				ls, ok := labels[m]
				if !ok {
					t.Errorf("panel %q reads %s, which the gateway does not export", p.Title, m)
					continue
				}
				for _, g := range by.FindAllStringSubmatch(q.Expr, -1) {
					if !ls[g[1]] {
						t.Errorf("panel %q groups %s by %s, a label it does not have", p.Title, m, g[1])
					}
				}
			}
		}
	}
	if n < 3 {
		t.Fatalf("the dashboard reads %d async metrics, want depth, oldest age and failures", n)
	}
}
