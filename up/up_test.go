package up

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/veerhq/veer/config"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConfigValidateNamesField(t *testing.T) {
	cases := []struct {
		cfg   Config
		field string
	}{
		{Config{Devices: -1}, "devices"},
		{Config{Rate: -2}, "rate"},
		{Config{Loss: 1}, "loss"},
		{Config{SiteBShare: 101}, "site_b_share"},
		{Config{Backend: BackendConfig{CPU: 2 * time.Second}}, "backend.cpu"},
		{Config{Failover: FailoverConfig{RecoveryTimeout: -time.Second}}, "failover.recovery_timeout"},
		{Config{Gateway: GatewayConfig{HealthFall: -1}}, "gateway.health_fall"},
	}
	for _, c := range cases {
		err := c.cfg.Validate()
		if f := config.Fields(err); len(f) != 1 || f[0] != c.field {
			t.Errorf("%+v: fields %v (%v), want [%s]", c.cfg, f, err, c.field)
		}
	}
	var zero Config
	if err := zero.Validate(); err != nil {
		t.Fatalf("zero config: %v", err)
	}
	d := zero.withDefaults()
	if d.Devices != DefaultDevices || d.Rate != DefaultRate || d.RestartAfter != DefaultRestartAfter || d.Gateway.HealthFall != DefaultHealthFall {
		t.Fatalf("defaults: %+v", d)
	}
}

func TestConfigFileErrorsHaveLines(t *testing.T) {
	var c Config
	err := config.Parse([]byte("devices: 10\nrate: -1\n"), "up.yaml", &c)
	if err == nil || !strings.Contains(err.Error(), "up.yaml:2: rate") {
		t.Fatalf("bad value: %v, want up.yaml:2: rate", err)
	}
	err = config.Parse([]byte("devices: 10\ndevicez: 3\n"), "up.yaml", &c)
	// the form is config's (issue 27 moves it to "up.yaml:2: devicez: ...")
	if err == nil || !strings.Contains(err.Error(), "up.yaml") || !strings.Contains(err.Error(), "2") || !strings.Contains(err.Error(), "devicez") {
		t.Fatalf("unknown field: %v, want the file, line 2 and the field", err)
	}
}

func FuzzConfigParse(f *testing.F) {
	f.Add([]byte("devices: 10\nrate: 1.5\nfailover: {disabled: true}\n"))
	f.Add([]byte("backend: {cpu: 1ms, latency: 2ms}\ngateway: {health_interval: 1s}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c Config
		if err := config.Parse(data, "up.yaml", &c); err == nil {
			if err := c.Validate(); err != nil {
				t.Fatalf("Parse accepted what Validate refuses: %v", err)
			}
		}
	})
}

func TestCounts(t *testing.T) {
	c := Counts{OK: 99, Shed: 50, Fail: 1}
	if c.Success() != 0.99 || c.Total() != 150 {
		t.Fatalf("success %v total %d", c.Success(), c.Total())
	}
	if (Counts{}).Success() != 1 {
		t.Fatal("no requests: success must be 1")
	}
	if d := c.Sub(Counts{OK: 9, Shed: 50}); d != (Counts{OK: 90, Fail: 1}) {
		t.Fatalf("sub %+v", d)
	}
	s := Snapshot{States: map[string]int{"a/primary": 3, "a/backup": 2, "ab/primary": 7, "b/primary": 1}}
	if s.GroupSize("a") != 5 || s.InState("a", "backup") != 2 || s.GroupSize("b") != 1 {
		t.Fatalf("group a %d, a backup %d, b %d", s.GroupSize("a"), s.InState("a", "backup"), s.GroupSize("b"))
	}
	st := newStats()
	st.record("a", "a.veer.test", "a1", "critical", "", resultOK)
	st.record("a", "a.veer.test", "", "sheddable", "503 overloaded", resultShed)
	st.record("b", "b.veer.test", "", "critical", "connect_refused", resultFail)
	snap := st.snapshot()
	if snap.All != (Counts{1, 1, 1}) || snap.Groups["a"] != (Counts{OK: 1, Shed: 1}) || snap.Clusters["a1"] != 1 ||
		snap.Reasons["503 overloaded"] != 1 || snap.Reasons["connect_refused"] != 1 || len(snap.Reasons) != 2 {
		t.Fatalf("snapshot %+v", snap)
	}
}

func TestBackendHandler(t *testing.T) {
	srv := httptest.NewServer(BackendHandler("a1", "a1-1", BackendConfig{CPU: time.Microsecond, Latency: time.Microsecond}))
	defer srv.Close()
	for path, want := range map[string]int{PathTrips: 200, PathFeed: 200, BackendHealth: 200, "/nope": 404} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: %d, want %d", path, resp.StatusCode, want)
		}
		if (path == PathTrips || path == PathFeed) && (resp.Header.Get(HeaderCluster) != "a1" || !strings.Contains(string(body), `"cluster":"a1"`)) {
			t.Errorf("%s: cluster header %q body %q", path, resp.Header.Get(HeaderCluster), body)
		}
	}
}

func TestServeBackendsStopsWithContext(t *testing.T) {
	ln1, _ := net.Listen("tcp", "127.0.0.1:0")
	a := ln1.Addr().String()
	ln1.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeBackends(ctx, "b1", []string{a}, BackendConfig{}) }()
	if err := waitTCP(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := ServeBackends(context.Background(), "b1", nil, BackendConfig{}); err == nil {
		t.Fatal("no address: want an error")
	}
}

func TestReadState(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadState(dir); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("no file: %v, want ErrNotRunning", err)
	}
	path := filepath.Join(dir, StateFile)
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadState(dir); err == nil || errors.Is(err, ErrNotRunning) || !strings.Contains(err.Error(), path) {
		t.Fatalf("corrupt file: %v, want an error naming %s", err, path)
	}
	// a state file left by a veer up that died: its API does not answer
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	if err := writeJSON(path, State{PID: 1, API: dead}); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadState(dir); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("dead API: %v, want ErrNotRunning", err)
	}
}

func TestScenarios(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range Scenarios() {
		if seen[s.Name] || s.Seed == "" || s.Promise == "" || s.run == nil {
			t.Fatalf("scenario %+v", s)
		}
		seen[s.Name] = true
		if got, ok := Lookup(s.Name); !ok || got.Name != s.Name {
			t.Fatalf("Lookup(%s)", s.Name)
		}
	}
	if _, ok := Lookup("nope"); ok {
		t.Fatal("Lookup(nope)")
	}
	r := Result{Name: "x", Seed: "000", Pass: true, Measured: []string{"1", "2"}}
	if s := r.String(); !strings.HasPrefix(s, "PASS x (seed 000)") || !strings.Contains(s, "1; 2") {
		t.Fatalf("String: %q", s)
	}
	a := Snapshot{Reasons: map[string]int64{"502 server_error": 1}}
	b := Snapshot{Reasons: map[string]int64{"502 server_error": 4, "connect_refused": 2}}
	if got := reasonsDelta(a, b); got != "3 502 server_error, 2 connect_refused" {
		t.Fatalf("reasonsDelta %q", got)
	}
}

func TestProcUsageOfSelf(t *testing.T) {
	u, err := procUsage(os.Getpid())
	if err != nil {
		t.Fatalf("veer up reads /proc (Linux): %v", err)
	}
	if u.rss <= 0 || u.cpu < 0 {
		t.Fatalf("usage %+v", u)
	}
}

func FuzzProcStatFields(f *testing.F) {
	f.Add([]byte("1 (veer) S 0 0 0 0 -1 0 0 0 0 0 12 3 0 0 20 0 1 0 1 1000 250 0"))
	f.Add([]byte("7 (a (b) c) R 1 1 1 0 -1 4194560 100 0 0 0 5 6 0 0 20 0 8 0 42 7000 99"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = parseStat(string(data)) // must not panic

	})
}

func TestParseStat(t *testing.T) {
	u, err := parseStat("7 (a (b) c) R 1 1 1 0 -1 4194560 100 0 0 0 5 6 0 0 20 0 8 0 42 7000 99")
	if err != nil || u.cpu != 110*time.Millisecond || u.rss != 99*int64(os.Getpagesize()) {
		t.Fatalf("%+v %v", u, err)
	}
	for _, bad := range []string{"", "1 veer S", "1 (x) S 1 2", "1 (x) S 0 0 0 0 -1 0 0 0 0 0 x 3 0 0 20 0 1 0 1 1000 250"} {
		if _, err := parseStat(bad); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}

// The view's CPU share: a child restarted between two readings (a new
// pid) counts from its next reading, never as negative time.
func TestCPUSinceAcrossRestarts(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	steps := []struct {
		name      string
		prev, cur map[int]time.Duration
		want      time.Duration
	}{
		{"steady", map[int]time.Duration{1: ms(100), 2: ms(50)}, map[int]time.Duration{1: ms(130), 2: ms(60)}, ms(40)},
		{"child 2 restarted as 3", map[int]time.Duration{1: ms(100), 2: ms(5000)}, map[int]time.Duration{1: ms(130), 3: ms(20)}, ms(30)},
		{"child gone", map[int]time.Duration{1: ms(100), 2: ms(50)}, map[int]time.Duration{1: ms(110)}, ms(10)},
		{"pid reused with less time", map[int]time.Duration{1: ms(100), 2: ms(900)}, map[int]time.Duration{1: ms(100), 2: ms(10)}, 0},
		{"first reading", nil, map[int]time.Duration{1: ms(100)}, 0},
	}
	for _, s := range steps {
		if got := cpuSince(s.prev, s.cur); got != s.want {
			t.Errorf("%s: %v, want %v", s.name, got, s.want)
		}
	}
}

func TestParsePss(t *testing.T) {
	if got := parsePss("Rss:  100 kB\nPss:   42 kB\nShared_Clean: 1 kB\n"); got != 42<<10 {
		t.Fatalf("pss %d", got)
	}
	for _, bad := range []string{"", "Pss:", "Pss: x kB", "Pss: -3 kB"} {
		if got := parsePss(bad); got != 0 {
			t.Errorf("%q: %d, want 0", bad, got)
		}
	}
}

// POST /v1/devices refuses a bad count or revision before touching the
// system, and a system not started (or stopped) launches nothing.
func TestAddDevicesBadInput(t *testing.T) {
	s := &System{}
	for _, q := range []string{"", "n=0", "n=-1", "n=x", fmt.Sprintf("n=%d", MaxNewDevices+1), "n=1&after_revision=-3", "n=1&after_revision=x"} {
		w := httptest.NewRecorder()
		s.handleAddDevices(w, httptest.NewRequest(http.MethodPost, "/v1/devices?"+q, nil))
		if w.Code != http.StatusBadRequest {
			t.Errorf("%q: %d, want 400", q, w.Code)
		}
	}
	if _, err := s.AddDevices(t.Context(), 1); !errors.Is(err, errClosed) {
		t.Fatalf("AddDevices on a system not running: %v", err)
	}
}

// The query parsers of POST /v1/devices and /v1/fault/overload: any query
// gets 400 or 503 from a system not running, never a panic or a launch.
func FuzzChaosQueries(f *testing.F) {
	for _, q := range []string{"n=3", "n=3&after_revision=7", "site=a&rate=1200&duration=10s", "rate=NaN&duration=1h", "rate=1e309&duration=-1s", "site=c&rate=1&duration=1s"} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, q string) {
		s := &System{}
		for _, h := range []http.HandlerFunc{s.handleAddDevices, s.handleOverload} {
			w := httptest.NewRecorder()
			r := httptest.NewRequest(http.MethodPost, "/x", nil)
			r.URL.RawQuery = q
			h(w, r)
			if w.Code != http.StatusBadRequest && w.Code != http.StatusServiceUnavailable {
				t.Fatalf("%q: status %d", q, w.Code)
			}
		}
	})
}
