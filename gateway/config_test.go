package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/limit"
)

func TestConfigErrorsNameFieldAndLine(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"routes: [{name: r, clusters: [{name: c}]}]\n", "clusters: at least one cluster"},
		{"clusters:\n  - name: c\n    backends: [{address: nohost}]\nroutes: [{name: r, clusters: [{name: c}]}]\n", "t.yaml:3: clusters[0].backends[0].address"},
		{"clusters: [{name: c, backends: [{address: 'a:1'}]}]\nroutes:\n  - name: r\n    clusters: [{name: x}]\n", "t.yaml:4: routes[0].clusters[0].name: no cluster named \"x\""},
		{"clusters: [{name: c, backends: [{address: 'a:1'}]}]\nroutes: [{name: r, clusters: [{name: c}]}]\nretry:\n  policy:\n    max_attempts: 5\n", "t.yaml:5: retry.policy.max_attempts"},
		{"clusters: [{name: c, backends: [{address: 'a:1'}]}]\nroutes: [{name: r, clusters: [{name: c}]}]\nlimits:\n  dimensions: [{name: t, default: {rate: 1}}]\n", "limits.keys"},
		{"clusters: [{name: c, protocol: h3, backends: [{address: 'a:1'}]}]\nroutes: [{name: r, clusters: [{name: c}]}]\n", "t.yaml:1: clusters[0].protocol"},
		{"clusters: [{name: c, backends: [{address: 'a:1'}]}]\nroutes: [{name: r, host: 'a*.b', clusters: [{name: c}]}]\n", "routes[0].host"},
		{"clusters: [{name: c, backends: [{address: 'a:1'}]}]\nroutes: [{name: r, clusters: [{name: c}]}]\nbogus: 1\n", "bogus"},
	} {
		var c Config
		err := config.Parse([]byte(tc.yaml), "t.yaml", &c)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one containing %q", tc.yaml, err, tc.want)
		}
	}
}

func TestApplyKeepsOldConfigOnError(t *testing.T) {
	a := upstream(t, func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("a")) })
	b := upstream(t, func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("b")) })
	g, base := startGateway(t, fill("shed: {enabled: true}\nlimits: {keys: [route], dimensions: [{name: route, default: {rate: 1000}}]}\nbreaker: {enabled: true}\nroutes: [{name: r, clusters: [{name: a}]}]\nclusters: [{name: a, backends: [{address: A}]}, {name: b, backends: [{address: B}]}]\n", "A", a, "B", b))
	cl := &http.Client{}
	if _, body := get(t, cl, base+"/"); body != "a" {
		t.Fatalf("before: %q", body)
	}
	cfg := g.Config()
	bad := cfg
	bad.Routes = []Route{{Name: "r", Clusters: []RouteCluster{{Name: "missing"}}}}
	if err := g.Apply(bad); err == nil {
		t.Fatal("invalid config applied")
	}
	moved := cfg
	moved.Listen.Plain = "127.0.0.1:1"
	moved.Routes = []Route{{Name: "r", Clusters: []RouteCluster{{Name: "b"}}}}
	var fe *config.FieldError
	if err := g.Apply(moved); !errors.As(err, &fe) || fe.Field != "listen" {
		t.Fatalf("listen change: %v, want a listen field error", err)
	}
	if _, body := get(t, cl, base+"/"); body != "a" {
		t.Fatalf("after rejected configs: %q, want the old route", body)
	}
	good := cfg
	good.Routes = []Route{{Name: "r", Clusters: []RouteCluster{{Name: "b"}}}}
	good.Shed.Target = 10 * time.Millisecond
	good.Limits.Dimensions = []limit.Dimension{{Name: "route", Default: limit.Limits{Rate: 2000}}}
	good.Retry.Policy.Initial = time.Millisecond
	if err := g.Apply(good); err != nil {
		t.Fatal(err)
	}
	if _, body := get(t, cl, base+"/"); body != "b" {
		t.Fatalf("after reload: %q", body)
	}
}

func TestAdminAPI(t *testing.T) {
	a := upstream(t, func(w http.ResponseWriter, r *http.Request) {})
	var cfg Config
	if err := config.Parse([]byte(fill("admin: {addr: '127.0.0.1:0', token: s3cret}\nroutes: [{name: r, clusters: [{name: a}]}]\nclusters: [{name: a, backends: [{address: A}]}]\n", "A", a)), "t", &cfg); err != nil {
		t.Fatal(err)
	}
	g, _ := startGatewayCfg(t, cfg)
	admin := "http://" + g.Addrs().Admin
	cl := &http.Client{}
	do := func(method, path, token string) int {
		req, _ := http.NewRequest(method, admin+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, s := range []struct {
		method, path, token string
		want                int
	}{
		{"GET", "/healthz", "", 200},
		{"GET", "/readyz", "", 200},
		{"GET", "/metrics", "", 200},
		{"GET", "/admin/state", "", 401},
		{"GET", "/admin/state", "wrong", 401},
		{"GET", "/admin/state", "s3cret", 200},
		{"GET", "/debug/pprof/heap", "", 401},
		{"GET", "/debug/pprof/heap", "s3cret", 200},
		{"GET", "/debug/pprof/nope", "s3cret", 404},
		{"POST", "/admin/drain?cluster=a&backend=" + a, "s3cret", 200},
		{"POST", "/admin/drain?cluster=nope", "s3cret", 404},
	} {
		if got := do(s.method, s.path, s.token); got != s.want {
			t.Errorf("%s %s (token %q): %d, want %d", s.method, s.path, s.token, got, s.want)
		}
	}
	if !g.State().Clusters[0].Backends[0].Drained {
		t.Error("drain via the admin API did not drain")
	}
	if do("POST", "/admin/undrain?cluster=a&backend="+a, "s3cret") != 200 || g.State().Clusters[0].Backends[0].Drained {
		t.Error("undrain failed")
	}
}

func FuzzConfig(f *testing.F) {
	f.Add([]byte("routes: [{name: r, clusters: [{name: c}]}]\nclusters: [{name: c, backends: [{address: 'a:1'}]}]\n"))
	f.Add([]byte("routes: [{name: r, host: '*.x', path_prefix: /a, policy: weighted, clusters: [{name: c, weight: 2}]}]\nclusters: [{name: c, protocol: h2c, backends: [{address: 'a:1', weight: 3}], health: {path: /h}}]\nlimits: {keys: [route], dimensions: [{name: r, default: {rate: 5}}]}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c Config
		if err := config.Parse(data, "f.yaml", &c); err != nil {
			return
		}
		// a config that validates must compile into a snapshot
		g := &Gateway{backends: map[string]*backend{}, cstates: map[string]*clusterState{}, breakers: map[string]*breakerEntry{}, m: testMetrics}
		d := c.withDefaults()
		d.Breaker.Enabled = false
		for i := range d.Routes {
			d.Routes[i].StaleOnError = nil
		}
		tb, err := g.compile(&d)
		if err != nil {
			t.Fatal(err)
		}
		tb.t.match("x", "/")
	})
}

func FuzzMatch(f *testing.F) {
	f.Add("api.example.com", "/v1/x")
	f.Add("API.EXAMPLE.COM.:8443", "/v1")
	f.Add("[::1]:80", "/static/")
	f.Add("", "")
	g := &Gateway{backends: map[string]*backend{}, cstates: map[string]*clusterState{}, breakers: map[string]*breakerEntry{}, m: testMetrics}
	c := Config{
		Clusters: []Cluster{{Name: "c", Backends: []Backend{{Address: "a:1"}}}},
		Routes: []Route{
			{Name: "api", Host: "api.example.com", PathPrefix: "/v1", Clusters: []RouteCluster{{Name: "c"}}},
			{Name: "wild", Host: "*.example.com", Clusters: []RouteCluster{{Name: "c"}}},
			{Name: "static", PathPrefix: "/static/", Clusters: []RouteCluster{{Name: "c"}}},
		},
	}
	d := c.withDefaults()
	tb, err := g.compile(&d)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, host, path string) {
		r := tb.t.match(host, path)
		if r == nil {
			return
		}
		if !strings.HasPrefix(path, r.prefix) {
			t.Fatalf("route %q matched path %q without its prefix", r.cfg.Name, path)
		}
		h := normalizeHost(host)
		switch rh := r.cfg.Host; {
		case rh == "":
		case strings.HasPrefix(rh, "*."):
			if !strings.HasSuffix(h, rh[1:]) {
				t.Fatalf("wildcard %q matched host %q", rh, host)
			}
		default:
			if h != rh {
				t.Fatalf("host %q matched route host %q", host, rh)
			}
		}
	})
}

// TestRouteClusterBound: a route over more clusters than the dispatcher's
// tried-set holds is refused with the field named (65 passed validation and
// panicked on every request before); a route at the bound serves.
func TestRouteClusterBound(t *testing.T) {
	addr, _ := echoUpstream(t, "b")
	build := func(n int) string {
		var cl, rc strings.Builder
		for i := range n {
			fmt.Fprintf(&cl, "  - {name: c%d, backends: [{address: %q}]}\n", i, addr)
			fmt.Fprintf(&rc, "{name: c%d}, ", i)
		}
		return "clusters:\n" + cl.String() + "routes:\n  - name: r\n    policy: weighted\n    clusters: [" + strings.TrimSuffix(rc.String(), ", ") + "]\n"
	}
	var c Config
	err := config.Parse([]byte(build(MaxRouteClusters+1)), "t.yaml", &c)
	if err == nil || !strings.Contains(err.Error(), "t.yaml:") || !slices.Contains(config.Fields(err), "routes[0].clusters") {
		t.Fatalf("65 clusters: %v, want routes[0].clusters refused", err)
	}
	_, base := startGateway(t, build(MaxRouteClusters))
	for range 20 {
		if resp, body := get(t, http.DefaultClient, base+"/"); resp.StatusCode != 200 || body != "b GET " {
			t.Fatalf("64 clusters: %d %q", resp.StatusCode, body)
		}
	}
}
