package console

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/control"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/store"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

const viewerToken = "viewer-secret-0123456789"

// startControl runs a real control.Service (embedded store) with the
// console mounted; it returns the admin base URL, the admin token and the
// service.
func startControl(t *testing.T, c *Console) (string, string, *control.Service) {
	t.Helper()
	dir := t.TempDir()
	sum := sha256.Sum256([]byte(viewerToken))
	svc, err := control.New(control.Config{DataDir: dir, Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0",
		Tokens: []control.Token{{Name: "watcher", Role: "viewer", SHA256: hex.EncodeToString(sum[:])}}},
		control.Options{Logger: obs.Discard, UI: c.Mount})
	if err != nil {
		t.Fatal(err)
	}
	addrs, err := svc.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	tok, err := os.ReadFile(filepath.Join(dir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	return "http://" + addrs.Admin, strings.TrimSpace(string(tok)), svc
}

func newConsole(t *testing.T, cfg Config, opts Options) *Console {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = obs.Discard
	}
	c, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func do(t *testing.T, method, url, body string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestPagesCarryCSPAndNoInlineCode: every page and asset is served with
// the CSP, and the pages hold no inline script, style or event handler
// (the CSP would block them).
func TestPagesCarryCSPAndNoInlineCode(t *testing.T) {
	base, _, _ := startControl(t, newConsole(t, Config{}, Options{}))
	for _, p := range []string{"/ui/", "/ui/app.js", "/ui/app.css"} {
		resp, body := do(t, "GET", base+p, "")
		if resp.StatusCode != 200 || resp.Header.Get("Content-Security-Policy") != CSP || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: %d, CSP %q, nosniff %q", p, resp.StatusCode, resp.Header.Get("Content-Security-Policy"), resp.Header.Get("X-Content-Type-Options"))
		}
		if p == "/ui/" {
			for _, bad := range []*regexp.Regexp{regexp.MustCompile(`<script(?:\s[^>]*)?>[^<]`), regexp.MustCompile(`\sstyle=`), regexp.MustCompile(`<style`), regexp.MustCompile(`\son[a-z]+=`), regexp.MustCompile(`https?://`)} {
				if bad.MatchString(body) {
					t.Errorf("index.html matches %s: inline code or a remote link", bad)
				}
			}
			for _, tag := range regexp.MustCompile(`<script[^>]*>`).FindAllString(body, -1) {
				if !strings.Contains(tag, ` src="`) {
					t.Errorf("inline script %s", tag)
				}
			}
		}
	}
	if strings.Contains(CSP, "unsafe") {
		t.Errorf("CSP allows unsafe sources: %s", CSP)
	}
	resp, _ := do(t, "GET", base+"/ui", "")
	if resp.Request.URL.Path != "/ui/" {
		t.Errorf("/ui redirected to %s", resp.Request.URL.Path)
	}
}

// TestCrossSiteWritesRefused: a write whose Origin or Sec-Fetch-Site names
// another site is refused before the API sees it; same-origin writes and
// clients that send neither header (curl, the CLI) reach the API.
func TestCrossSiteWritesRefused(t *testing.T) {
	base, admin, _ := startControl(t, newConsole(t, Config{}, Options{}))
	host := strings.TrimPrefix(base, "http://")
	steps := []struct {
		name   string
		method string
		hdr    []string
		want   int
	}{
		{"curl", "POST", nil, 400}, // the API's own answer to an empty playbook
		{"same origin", "POST", []string{"Origin", base, "Sec-Fetch-Site", "same-origin"}, 400},
		{"other origin", "POST", []string{"Origin", "http://evil.example"}, 403},
		{"other port", "POST", []string{"Origin", "http://" + strings.Split(host, ":")[0] + ":1"}, 403},
		{"null origin", "POST", []string{"Origin", "null"}, 403},
		{"cross-site fetch", "POST", []string{"Sec-Fetch-Site", "cross-site"}, 403},
		{"same-site other origin", "POST", []string{"Sec-Fetch-Site", "same-site"}, 403},
		{"cross-site read is a read", "GET", []string{"Origin", "http://evil.example"}, 200},
	}
	for _, s := range steps {
		path := "/v1/admin/playbook"
		if s.method == "GET" {
			path = "/v1/admin/whoami"
		}
		hdr := append([]string{"Authorization", "Bearer " + admin}, s.hdr...)
		resp, body := do(t, s.method, base+path, "", hdr...)
		if resp.StatusCode != s.want {
			t.Errorf("%s: %d %s, want %d", s.name, resp.StatusCode, body, s.want)
		}
		if s.want == 403 && !strings.Contains(body, ErrCrossSite.Error()) {
			t.Errorf("%s: body %q does not name the refusal", s.name, body)
		}
	}
}

// TestLiveNeedsAToken: the stream answers 401 without a valid token and
// streams frames to a viewer.
func TestLiveNeedsAToken(t *testing.T) {
	base, _, _ := startControl(t, newConsole(t, Config{}, Options{}))
	if resp, _ := do(t, "GET", base+"/ui/live", "", "Authorization", "Bearer wrong"); resp.StatusCode != 401 {
		t.Fatalf("wrong token: %d, want 401", resp.StatusCode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/ui/live", nil)
	req.Header.Set("Authorization", "Bearer "+viewerToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("viewer: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var f Frame
			if err := json.Unmarshal([]byte(d), &f); err != nil {
				t.Fatalf("frame %s: %v", d, err)
			}
			if len(f.Gateways) != 0 {
				t.Fatalf("frame lists %d gateways, none announced", len(f.Gateways))
			}
			return
		}
	}
	t.Fatalf("stream ended without a frame: %v", sc.Err())
}

// fakeGateway serves real Prometheus metrics the way a gateway's admin
// listener does.
type fakeGateway struct {
	srv      *httptest.Server
	requests *prometheus.CounterVec
	admitted *prometheus.CounterVec
	usable   *prometheus.GaugeVec
	breaker  *prometheus.GaugeVec
}

func newFakeGateway(t *testing.T) *fakeGateway {
	reg := prometheus.NewRegistry()
	g := &fakeGateway{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: mRequests}, []string{"route", "kind"}),
		admitted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: mAdmitted}, []string{"endpoint", "tier"}),
		usable:   prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: mUsable}, []string{"cluster", "backend"}),
		breaker:  prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: mBreaker}, []string{"cluster"}),
	}
	reg.MustRegister(g.requests, g.admitted, g.usable, g.breaker)
	g.srv = httptest.NewServer(obs.Handler(reg))
	t.Cleanup(g.srv.Close)
	return g
}

func announce(t *testing.T, st store.Store, name, url string) {
	t.Helper()
	b, _ := json.Marshal(store.Announcement{Name: name, Admin: url})
	if _, err := st.Put(context.Background(), store.KeyGatewaysPrefix+name, b, store.Write{}); err != nil {
		t.Fatal(err)
	}
}

// TestPollRatesAndDown: rates are counter deltas over the manual clock's
// time between polls; a gateway that stops answering is down in the next
// poll while the other stays up.
func TestPollRatesAndDown(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC))
	c := newConsole(t, Config{}, Options{Clock: clk})
	_, _, svc := startControl(t, c)
	g1, g2 := newFakeGateway(t), newFakeGateway(t)
	announce(t, svc.Store(), "gw-1", g1.srv.URL)
	announce(t, svc.Store(), "gw-2", g2.srv.URL)
	g1.usable.WithLabelValues("east", "10.0.0.1:80").Set(1)
	g1.usable.WithLabelValues("east", "10.0.0.2:80").Set(0)
	g1.breaker.WithLabelValues("east").Set(1)
	g1.requests.WithLabelValues("api", "success").Add(100)
	p := &poller{c: c, st: svc.Store(), prev: map[string]scrape{}}
	ctx := context.Background()

	f := p.poll(ctx)
	if len(f.Gateways) != 2 || !f.Gateways[0].Up || !f.Gateways[1].Up || f.RPS != 0 {
		t.Fatalf("first poll: %+v, want two gateways up at 0 requests/s", f)
	}
	g1.requests.WithLabelValues("api", "success").Add(20)
	g1.requests.WithLabelValues("api", "overloaded").Add(4)
	g1.admitted.WithLabelValues("api", "critical").Add(10)
	g2.requests.WithLabelValues("web", "success").Add(6)
	clk.Advance(2 * time.Second)
	f = p.poll(ctx)
	gw1 := f.Gateways[0]
	if gw1.Name != "gw-1" || gw1.RPS != 12 || gw1.Errors["overloaded"] != 2 || gw1.Admitted["critical"] != 5 {
		t.Errorf("gw-1: %+v, want 12 req/s, 2 overloaded/s, 5 critical admitted/s", gw1)
	}
	if len(gw1.Clusters) != 1 || gw1.Clusters[0].Breaker != "open" || gw1.Clusters[0].Backends != 2 || len(gw1.Clusters[0].Out) != 1 {
		t.Errorf("gw-1 clusters: %+v, want east with an open breaker and 1 of 2 backends out", gw1.Clusters)
	}
	if f.RPS != 15 || f.Admitted["critical"] != 5 {
		t.Errorf("totals: %v req/s, admitted %v; want 15 and critical 5", f.RPS, f.Admitted)
	}
	g2.srv.Close()
	clk.Advance(time.Second)
	f = p.poll(ctx)
	if !f.Gateways[0].Up || f.Gateways[1].Up || f.Gateways[1].Error == "" {
		t.Errorf("after gw-2 stopped: %+v, want gw-1 up and gw-2 down with a reason", f.Gateways)
	}
}

// TestFillSteps: rates from two scrapes, as a step table.
func TestFillSteps(t *testing.T) {
	req := func(kind string, v float64) (string, sample) {
		l := map[string]string{"route": "api", "kind": kind}
		return seriesKey(mRequests, l), sample{mRequests, l, v}
	}
	mk := func(kv ...any) samples {
		s := samples{}
		for i := 0; i+1 < len(kv); i += 2 {
			k, v := req(kv[i].(string), kv[i+1].(float64))
			s[k] = v
		}
		return s
	}
	for _, st := range []struct {
		name      string
		prev, cur samples
		dt        float64
		rps       float64
		errors    float64
	}{
		{"first scrape", nil, mk("success", 50.0), 0, 0, 0},
		{"steady", mk("success", 50.0), mk("success", 60.0), 2, 5, 0},
		{"new error series counts from 0", mk("success", 50.0), mk("success", 50.0, "timeout", 3.0), 1, 3, 3},
		{"restart counts from 0", mk("success", 500.0), mk("success", 4.0), 2, 2, 0},
	} {
		var g Gateway
		g.fill(st.prev, st.cur, st.dt)
		if g.RPS != st.rps || g.Errors["timeout"] != st.errors {
			t.Errorf("%s: rps %v errors %v, want %v and %v", st.name, g.RPS, g.Errors, st.rps, st.errors)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, st := range []struct {
		cfg Config
		ok  bool
	}{
		{Config{}, true},
		{Config{PollEvery: 2 * time.Second, ScrapeTimeout: time.Second}, true},
		{Config{PollEvery: -1}, false},
		{Config{ScrapeTimeout: -1}, false},
		{Config{ScrapeTimeout: time.Second}, false}, // not shorter than the default poll
	} {
		if _, err := New(st.cfg, Options{}); (err == nil) != st.ok {
			t.Errorf("New(%+v): %v, want ok=%v", st.cfg, err, st.ok)
		}
	}
}

func FuzzParseSamples(f *testing.F) {
	f.Add("# TYPE veer_gateway_requests_total counter\nveer_gateway_requests_total{route=\"api\",kind=\"success\"} 12\n")
	f.Add("veer_gateway_breaker_state{cluster=\"east\"} 7\nveer_gateway_backend_usable_state{cluster=\"e\",backend=\"x\"} 0\n")
	f.Add("veer_shed_shed_total{endpoint=\"a\",tier=\"sheddable\",reason=\"overload\"} NaN\n")
	f.Fuzz(func(t *testing.T, in string) {
		s, err := parseSamples(strings.NewReader(in))
		if err != nil {
			return
		}
		var g Gateway
		g.fill(s, s, 1) // any parsed input fills without a panic
		g.fill(nil, s, 1)
		f := Frame{Gateways: []Gateway{g}}
		f.total()
		if _, err := json.Marshal(f); err != nil {
			t.Fatalf("frame of %q does not encode: %v", in, err)
		}
	})
}

// TestCallersMerged: GET /ui/callers reads every announced gateway's
// /admin/callers, sums the counts per endpoint and caller, keeps each
// tier the gateways resolve, names a gateway that does not answer, and
// needs a token.
func TestCallersMerged(t *testing.T) {
	c := newConsole(t, Config{}, Options{})
	base, _, svc := startControl(t, c)
	serve := func(body string) string {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/admin/callers" {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, body)
		}))
		t.Cleanup(s.Close)
		return s.URL
	}
	announce(t, svc.Store(), "gw-1", serve(`{"endpoints":[{"endpoint":"api","callers":[{"caller":"rider-app","count":5,"tier":"critical"},{"caller":"batch","count":1,"tier":"sheddable_plus"}]}]}`))
	announce(t, svc.Store(), "gw-2", serve(`{"endpoints":[{"endpoint":"api","callers":[{"caller":"batch","count":9,"tier":"sheddable"}]},{"endpoint":"web","callers":[{"caller":"rider-app","count":2,"tier":"sheddable_plus"}]}]}`))
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	announce(t, svc.Store(), "gw-3", dead.URL)

	if resp, _ := do(t, "GET", base+"/ui/callers", "", "Authorization", "Bearer wrong"); resp.StatusCode != 401 {
		t.Fatalf("wrong token: %d, want 401", resp.StatusCode)
	}
	resp, body := do(t, "GET", base+"/ui/callers", "", "Authorization", "Bearer "+viewerToken)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Security-Policy") != CSP {
		t.Fatalf("viewer: %d %q %s", resp.StatusCode, resp.Header.Get("Content-Security-Policy"), body)
	}
	var got Callers
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	want := []EndpointCallers{
		{Endpoint: "api", Callers: []CallerCount{{Caller: "batch", Count: 10, Tiers: []string{"sheddable", "sheddable_plus"}}, {Caller: "rider-app", Count: 5, Tiers: []string{"critical"}}}},
		{Endpoint: "web", Callers: []CallerCount{{Caller: "rider-app", Count: 2, Tiers: []string{"sheddable_plus"}}}},
	}
	if !reflect.DeepEqual(got.Endpoints, want) {
		t.Errorf("endpoints %+v\nwant      %+v", got.Endpoints, want)
	}
	if len(got.Gateways) != 3 || got.Gateways[0].Error != "" || got.Gateways[1].Error != "" || !strings.Contains(got.Gateways[2].Error, "not answering") {
		t.Errorf("gateways %+v, want gw-1 and gw-2 read and gw-3 not answering", got.Gateways)
	}
}

// FuzzMergeCallers: any /admin/callers body that decodes, merged with
// itself, gives each endpoint × caller once, twice its input count,
// endpoints by name and callers by count.
func FuzzMergeCallers(f *testing.F) {
	f.Add([]byte(`{"endpoints":[{"endpoint":"api","callers":[{"caller":"a","count":5,"tier":"critical"},{"caller":"b","count":1}]}]}`))
	f.Add([]byte(`{"endpoints":[{"endpoint":"api","callers":[{"caller":"a","count":1}]},{"endpoint":"api","callers":[{"caller":"a","count":2,"tier":"sheddable"}]}]}`))
	f.Add([]byte(`{"endpoints":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var g gatewayCallers
		if json.Unmarshal(b, &g) != nil {
			return
		}
		want := map[[2]string]uint64{}
		for _, e := range g.Endpoints {
			for _, c := range e.Callers {
				if c.Count > 1<<60 {
					return // sums saturate; checked apart
				}
				want[[2]string{e.Endpoint, c.Caller}] += 2 * c.Count
			}
		}
		got := mergeCallers([]gatewayCallers{g, g})
		n := 0
		for i, e := range got {
			if i > 0 && got[i-1].Endpoint >= e.Endpoint {
				t.Fatalf("endpoints out of order: %q then %q", got[i-1].Endpoint, e.Endpoint)
			}
			for j, c := range e.Callers {
				n++
				k := [2]string{e.Endpoint, c.Caller}
				if w, ok := want[k]; !ok || w != c.Count {
					t.Fatalf("%v: count %d, want %d (listed %v)", k, c.Count, w, ok)
				}
				if j > 0 && e.Callers[j-1].Count < c.Count {
					t.Fatalf("%s: callers not by count: %v", e.Endpoint, e.Callers)
				}
			}
		}
		if n != len(want) {
			t.Fatalf("%d rows, want %d", n, len(want))
		}
	})
}

// TestFillLimitedByTier: veer_limit_rejected_total becomes limited requests
// per second by dimension and by tier; a series without the tier label (an
// older gateway) counts by dimension only.
func TestFillLimitedByTier(t *testing.T) {
	const text = `# TYPE veer_limit_rejected_total counter
veer_limit_rejected_total{dimension="tenant",reason="rate",tier="critical"} %d
veer_limit_rejected_total{dimension="tenant",reason="concurrency",tier="critical"} %d
veer_limit_rejected_total{dimension="tenant",reason="rate",tier="sheddable"} %d
veer_limit_rejected_total{dimension="route",reason="rate"} %d
`
	scrape := func(a, b, c, d int) samples {
		s, err := parseSamples(strings.NewReader(fmt.Sprintf(text, a, b, c, d)))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	var g Gateway
	g.fill(scrape(10, 0, 5, 1), scrape(30, 4, 9, 5), 2)
	f := Frame{Gateways: []Gateway{g}}
	f.total()
	for _, w := range []struct {
		m    map[string]float64
		k    string
		want float64
	}{
		{f.LimitedTier, "critical", 12}, {f.LimitedTier, "sheddable", 2}, {f.Limited, "tenant", 14}, {f.Limited, "route", 2},
	} {
		if w.m[w.k] != w.want {
			t.Errorf("%s: %v, want %v (frame %+v %+v)", w.k, w.m[w.k], w.want, f.Limited, f.LimitedTier)
		}
	}
	if len(f.LimitedTier) != 2 {
		t.Errorf("limited by tier %v: want critical and sheddable only", f.LimitedTier)
	}
}
