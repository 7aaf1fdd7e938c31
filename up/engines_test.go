package up

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/gateway"
)

func TestParseStoreAndRedis(t *testing.T) {
	stores := []struct {
		in        string
		local     bool
		endpoints string
		bad       bool
	}{
		{"", false, "", false},
		{"etcd://local", true, "", false},
		{"etcd://10.0.0.1:2379", false, "http://10.0.0.1:2379", false},
		{"etcd://a:1,b:2", false, "http://a:1,http://b:2", false},
		{"etcd://", false, "", true},
		{"etcd://a", false, "", true},
		{"etcd://a:0", false, "", true},
		{"etcd://a:1,", false, "", true},
		{"http://a:1", false, "", true},
		{"local", false, "", true},
	}
	for _, c := range stores {
		local, eps, err := ParseStore(c.in)
		if (err != nil) != c.bad || local != c.local || strings.Join(eps, ",") != c.endpoints {
			t.Errorf("ParseStore(%q) = %v %v %v", c.in, local, eps, err)
		}
	}
	redis := []struct {
		in    string
		local bool
		addr  string
		bad   bool
	}{
		{"", false, "", false},
		{"local", true, "", false},
		{"redis://127.0.0.1:6379", false, "127.0.0.1:6379", false},
		{"redis://:6379", false, "", true},
		{"redis://h", false, "", true},
		{"127.0.0.1:6379", false, "", true},
		{"etcd://local", false, "", true},
	}
	for _, c := range redis {
		local, addr, err := ParseRedis(c.in)
		if (err != nil) != c.bad || local != c.local || addr != c.addr {
			t.Errorf("ParseRedis(%q) = %v %q %v", c.in, local, addr, err)
		}
	}
}

func FuzzParseEngines(f *testing.F) {
	for _, s := range []string{"", "etcd://local", "etcd://a:1,b:2", "redis://h:1", "local", "etcd://[::1]:2379"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if _, eps, err := ParseStore(s); err == nil {
			for _, e := range eps {
				if !strings.HasPrefix(e, "http://") {
					t.Fatalf("%q: endpoint %q", s, e)
				}
			}
		}
		if _, addr, err := ParseRedis(s); err == nil && addr != "" && checkHostPort(addr) != nil {
			t.Fatalf("%q: addr %q", s, addr)
		}
	})
}

func TestValidateEnginesNamesField(t *testing.T) {
	for _, c := range []struct {
		cfg   Config
		field string
	}{
		{Config{Store: "etcd:/x"}, "store"},
		{Config{Redis: "redis://x"}, "redis"},
		{Config{Search: SearchConfig{Limit: -1}}, "search.limit"},
		{Config{Search: SearchConfig{Burst: -1}}, "search.burst"},
	} {
		err := c.cfg.Validate()
		if f := config.Fields(err); len(f) != 1 || f[0] != c.field {
			t.Errorf("%+v: %v, want field %s", c.cfg, err, c.field)
		}
	}
}

// The gateways' limits section: shared through Redis with the fallback at
// limit ÷ 2; undivided (the FAIL-when-off knob) says one instance; without
// Redis each gateway gets half. Each parses as a gateway config's limits.
func TestLimitsYAML(t *testing.T) {
	for _, c := range []struct {
		redis     string
		undivided bool
		want      string
	}{
		{"127.0.0.1:7", false, `{search: {rate: 100, burst: 10}}}], keys: [route], instances: 2, redis: "127.0.0.1:7"}`},
		{"127.0.0.1:7", true, `{search: {rate: 100, burst: 10}}}], keys: [route], instances: 1, redis: "127.0.0.1:7"}`},
		{"", false, `{search: {rate: 50, burst: 5}}}], keys: [route], instances: 2}`},
	} {
		s := &System{cfg: Config{Gateway: GatewayConfig{LimitUndivided: c.undivided}}.withDefaults(), engines: Engines{Redis: c.redis}}
		if y := s.limitsYAML(); !strings.Contains(y, c.want) {
			t.Errorf("redis %q undivided %v: %s", c.redis, c.undivided, y)
		}
		y := s.gatewayYAML("127.0.0.2", 8443, "127.0.0.1:9", t.TempDir(), "c.pem", "k.pem", []string{"a1"}, map[string][]string{"a1": {"127.0.0.1:10"}, "a2": {"127.0.0.1:11"}}) // a2: the release route's B
		var g gateway.Config
		if err := config.Parse([]byte(y), "gateway.yaml", &g); err != nil {
			t.Errorf("%s: %v", y, err)
		}
		if len(g.Limits.Dimensions) != 1 || g.Limits.Dimensions[0].Overrides["search"].Rate == 0 {
			t.Errorf("%s: %+v", y, g.Limits)
		}
	}
}

func TestEngineScenariosSkipAndPresent(t *testing.T) {
	for _, sc := range EngineScenarios() {
		if got, ok := Lookup(sc.Name); !ok || got.Name != sc.Name || sc.skip == nil || sc.run == nil {
			t.Fatalf("Lookup(%s)", sc.Name)
		}
	}
	cases := []struct {
		e                Engines
		redisWhy, etcdWy string // substrings; "" runs
		present          []string
	}{
		{Engines{}, "without --redis", "embedded store", nil},
		{Engines{Redis: "h:1", RedisLocal: true, Store: "http://h:2", StoreLocal: true}, "", "", []string{"redis-kill", "etcd-kill"}},
		{Engines{Redis: "h:1", Store: "http://h:2"}, "did not start", "did not start", []string{"redis-kill", "etcd-kill"}},
	}
	for _, c := range cases {
		st := State{Engines: c.e}
		check := func(got, want string) {
			if (want == "") != (got == "") || !strings.Contains(got, want) {
				t.Errorf("%+v: skip %q, want %q", c.e, got, want)
			}
		}
		check(skipRedis(st), c.redisWhy)
		check(skipEtcd(st), c.etcdWy)
		var extra []string
		for _, sc := range Present(st)[len(Scenarios()):] {
			extra = append(extra, sc.Name)
		}
		if strings.Join(extra, ",") != strings.Join(c.present, ",") {
			t.Errorf("%+v: present %v, want %v", c.e, extra, c.present)
		}
	}
	r := Result{Name: "redis-kill", Seed: "003", Skipped: "why"}
	if s := r.String(); !strings.HasPrefix(s, "SKIPPED redis-kill (seed 003): why") {
		t.Fatalf("String: %q", s)
	}
}

func TestLimitedBadInput(t *testing.T) {
	s := &System{}
	for _, q := range []string{"", "rate=0&duration=1s", "rate=NaN&duration=1s", "rate=10&duration=0s", "rate=10&duration=2m", "rate=1e9&duration=1s", "rate=10&duration=1s"} {
		w := httptest.NewRecorder()
		s.handleLimited(w, httptest.NewRequest(http.MethodPost, "/v1/fault/limited?"+q, nil))
		if w.Code != http.StatusBadRequest {
			t.Errorf("%q: %d, want 400", q, w.Code)
		}
	}
}

// Growth after warm-up: the minimum of each window, first against last;
// the warm-up's samples do not count.
func TestSoakGrowth(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int, v int64) SoakSample { return SoakSample{At: t0.Add(time.Duration(s) * time.Second), RSS: v} }
	samples := []SoakSample{at(0, 500), at(5, 100), at(15, 120), at(25, 80), at(35, 110), at(45, 90), at(55, 86)}
	rss := func(s SoakSample) float64 { return float64(s.RSS) }
	steps := []struct {
		warm, window time.Duration
		first, last  float64
		windows      int
	}{
		{0, 20 * time.Second, 100, 86, 3},               // [0,20): 500,100,120 -> 100; [20,40): 80; [40,60): 90,86 -> 86
		{10 * time.Second, 20 * time.Second, 80, 86, 3}, // from 10: [10,30) 120,80 -> 80; [30,50) 110,90 -> 90; [50,70) 86
		{10 * time.Second, time.Minute, 80, 80, 1},
		{time.Hour, time.Minute, 0, 0, 0},
	}
	for _, s := range steps {
		g := growth(samples, t0.Add(s.warm), s.window, rss)
		if g.First != s.first || g.Last != s.last || g.Windows != s.windows {
			t.Errorf("warm %v window %v: %+v, want first %v last %v windows %d", s.warm, s.window, g, s.first, s.last, s.windows)
		}
	}
	rep := SoakReport{Config: SoakConfig{WarmUp: 10 * time.Second, GrowthWindow: 20 * time.Second}.withDefaults(), Start: t0, Samples: samples,
		Growth: map[string]Growth{}, Results: []Result{{Name: "x", Pass: true}, {Name: "y", Skipped: "no"}}, Outside: Counts{Fail: 1}}
	rep.judge()
	// rss +7.5 % (within), goroutines 0 throughout (no growth), y
	// skipped (not a FAIL), one request failed outside: FAIL for that alone
	if rep.Pass || len(rep.Reasons) != 1 || !strings.Contains(rep.Reasons[0], "outside") {
		t.Fatalf("judge: %v %q", rep.Pass, rep.Reasons)
	}
	if g := rep.Growth["rss"]; g.Share < 0.074 || g.Share > 0.076 {
		t.Fatalf("rss growth %+v, want +7.5%%", g)
	}
	rep.Samples = append(rep.Samples, at(65, 120)) // [50,70): min still 86
	rep.Samples = append(rep.Samples, at(75, 100)) // [70,90): 100, +25 %
	rep.Outside = Counts{}
	rep.judge()
	if rep.Pass || len(rep.Reasons) != 1 || !strings.Contains(rep.Reasons[0], "rss grew 25.0%") || !strings.Contains(rep.String(), "warm-up:   10s; measured") {
		t.Fatalf("judge after growth: %v %q", rep.Pass, rep.Reasons)
	}
	if !strings.Contains(rep.String(), "requests outside the windows: 0 ok, 0 shed, 0 failed") {
		t.Fatalf("report:\n%s", rep.String())
	}
}
