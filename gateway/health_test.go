package gateway

import (
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/outcome"
)

func TestCheckStateSteps(t *testing.T) {
	// rise 2, fall 3
	var c checkState
	down := false
	for i, s := range []struct {
		ok       bool
		wantDown bool
	}{
		{false, false}, {false, false}, {false, true}, // third failure: down
		{true, true}, {false, true}, {true, true}, {true, false}, // two successes in a row: up
		{false, false}, {true, false}, {false, false}, {false, false}, {false, true},
	} {
		down = c.observe(s.ok, 2, 3, down)
		if down != s.wantDown {
			t.Fatalf("step %d (ok=%v): down=%v, want %v", i, s.ok, down, s.wantDown)
		}
	}
}

func TestOutlierSteps(t *testing.T) {
	cfg := Outlier{ConsecutiveErrors: 3, FailureRatio: 0.5, MinRequests: 6, BaseEjection: 30 * time.Second, MaxEjection: 75 * time.Second}
	t0 := time.Unix(1000, 0)
	var s outlierState
	for i, st := range []struct {
		at     time.Duration
		failed bool
		eject  time.Duration
	}{
		{0, true, 0}, {1, true, 0}, {2, true, 30 * time.Second}, // 3 consecutive: 30 s × 1
		{40, true, 0}, {41, false, 0}, {42, true, 0}, {43, true, 0}, {44, false, 0}, // window restarts; 3 of 5
		{45, true, 60 * time.Second},                                  // 4 failed of 6 ≥ 50%, ejection n=2: 60 s
		{200, true, 0}, {201, true, 0}, {202, true, 75 * time.Second}, // n=3: 90 s capped at 75 s
		{300, true, 0}, {305, false, 0}, {311, true, 0}, {312, true, 0}, // 10 s window: ratio counts reset at 310
	} {
		got := s.record(t0.Add(st.at*time.Second), st.failed, &cfg)
		if got != st.eject {
			t.Fatalf("step %d (t=%ds failed=%v): eject %v, want %v", i, st.at, st.failed, got, st.eject)
		}
	}
}

func TestEjectionCapAndPanic(t *testing.T) {
	now := time.Unix(1000, 0)
	c := &cluster{cfg: Cluster{Outlier: Outlier{ConsecutiveErrors: 1, BaseEjection: time.Minute, MaxEjection: time.Hour, MaxEjectedShare: 0.5, FailureRatio: 1, MinRequests: 100}}}
	for i := range 4 {
		c.backends = append(c.backends, newBackend("c", string(rune('a'+i)), now))
		c.cum = append(c.cum, i+1)
	}
	fail := outcome.Of(outcome.ConnectRefused)
	ejected := 0
	for _, b := range c.backends {
		if d := b.observe(now, fail, &c.cfg.Outlier, func() bool { return c.mayEject(now.UnixNano()) }); d > 0 {
			ejected++
		}
	}
	if ejected != 2 {
		t.Fatalf("%d of 4 ejected, want 2 (max_ejected_share 0.5)", ejected)
	}
	// every backend down by active checks: panic mode spreads over all
	for _, b := range c.backends {
		b.down.Store(true)
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	seen := map[*backend]bool{}
	for range 200 {
		b, panicked := c.pick(now.UnixNano(), rnd, nil)
		if b == nil || !panicked {
			t.Fatalf("pick in panic: %v %v", b, panicked)
		}
		seen[b] = true
	}
	if len(seen) != 4 {
		t.Fatalf("panic mode used %d backends, want all 4", len(seen))
	}
}

func TestP2CPrefersLeastOutstanding(t *testing.T) {
	now := time.Unix(1000, 0)
	c := &cluster{cfg: Cluster{}}
	for i := range 3 {
		c.backends = append(c.backends, newBackend("c", string(rune('a'+i)), now.Add(-time.Hour)))
		c.cum = append(c.cum, i+1) // weights 1,1,1
	}
	c.backends[0].outstanding.Store(10)
	c.backends[1].outstanding.Store(10)
	rnd := rand.New(rand.NewPCG(3, 4))
	counts := map[string]int{}
	for range 3000 {
		b, _ := c.pick(now.UnixNano(), rnd, nil)
		counts[b.addr]++
	}
	// c is idle: it wins every draw that includes it (2 of 3 pairs), so
	// about 2/3 of the picks, never less than half
	if counts["c"] < 1500 {
		t.Fatalf("idle backend got %v of 3000", counts)
	}
	// weights: 1:3 with equal load gives ≈ 1:3 of the first draws
	w := &cluster{cfg: Cluster{}}
	w.backends = []*backend{newBackend("w", "x", now.Add(-time.Hour)), newBackend("w", "y", now.Add(-time.Hour))}
	w.cum = []int{1, 4}
	counts = map[string]int{}
	for range 4000 {
		b, _ := w.pick(now.UnixNano(), rnd, nil)
		counts[b.addr]++
	}
	if counts["y"] < 2*counts["x"] {
		t.Fatalf("weight 3 vs 1: %v", counts)
	}
}

func TestSlowStart(t *testing.T) {
	now := time.Unix(1000, 0)
	b := newBackend("c", "a", now)
	for _, s := range []struct {
		after time.Duration
		want  float64
	}{{0, 0.1}, {5 * time.Second, 0.55}, {10 * time.Second, 1}, {time.Minute, 1}} {
		if got := b.slowStartFactor(now.Add(s.after).UnixNano(), 10*time.Second); got < s.want-1e-9 || got > s.want+1e-9 {
			t.Errorf("after %v: %v, want %v", s.after, got, s.want)
		}
	}
}

func TestActiveHealthChecks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var healthy atomic.Bool
		healthy.Store(true)
		srv := newPipeServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !healthy.Load() {
				http.Error(w, "sick", 500)
			}
		}))
		g, err := New(Config{
			Listen:   Listen{Addr: "off"},
			Routes:   []Route{{Name: "r", Clusters: []RouteCluster{{Name: "c"}}}},
			Clusters: []Cluster{{Name: "c", Backends: []Backend{{Address: "pipe:80"}}, Health: Health{Path: "/h", Interval: time.Second, Rise: 2, Fall: 3}}},
		}, Options{Logger: obsDiscard(), Registerer: prometheus.NewRegistry(), DialContext: srv.dial})
		if err != nil {
			t.Fatal(err)
		}
		b := g.snap.Load().clusters["c"].backends[0]
		step := func(d time.Duration) { time.Sleep(d); synctest.Wait() }
		step(0)
		healthy.Store(false)
		step(2 * time.Second) // checks at 1 s, 2 s: two failures, still up
		if b.down.Load() {
			t.Fatal("down after 2 failures, fall is 3")
		}
		step(time.Second)
		if !b.down.Load() {
			t.Fatal("up after 3 failures")
		}
		// down: checked every unhealthy_interval (250 ms by default)
		healthy.Store(true)
		step(250 * time.Millisecond)
		if !b.down.Load() {
			t.Fatal("up after 1 success, rise is 2")
		}
		step(250 * time.Millisecond)
		if b.down.Load() {
			t.Fatal("down after 2 successes 250 ms apart")
		}
		// up again: back to every interval
		healthy.Store(false)
		step(2 * time.Second)
		if b.down.Load() {
			t.Fatal("down after 2 failures at the 1 s interval")
		}
		_ = g.Close()
	})
}

// TestCheckReadmitsEjected: step table of setCheck on an ejected backend.
// An ejection ends early once checks failed during it and then Rise passed
// in a row; a backend whose checks pass throughout waits out its ejection
// (it fails requests, not checks).
func TestCheckReadmitsEjected(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct {
		name   string
		checks []bool
		want   []bool // ejected after each check
	}{
		{"fails then passes", []bool{false, true, true}, []bool{true, true, false}},
		{"passes throughout", []bool{true, true, true, true}, []bool{true, true, true, true}},
		{"fails, passes once, fails", []bool{false, true, false, true, true}, []bool{true, true, true, true, false}},
	} {
		b := newBackend("c", "a", t0.Add(-time.Hour))
		b.ejectedUntil.Store(t0.Add(30 * time.Second).UnixNano())
		for i, ok := range tc.checks {
			now := t0.Add(time.Duration(i+1) * 250 * time.Millisecond)
			b.setCheck(now, ok, 2, 3)
			if got := b.ejectedUntil.Load() > now.UnixNano(); got != tc.want[i] {
				t.Fatalf("%s: check %d (ok=%v): ejected=%v, want %v", tc.name, i, ok, got, tc.want[i])
			}
		}
	}
}

func TestRetryAvoidsTheFailedBackend(t *testing.T) {
	now := time.Unix(1000, 0)
	c := &cluster{cfg: Cluster{}}
	for i := range 3 {
		c.backends = append(c.backends, newBackend("c", string(rune('a'+i)), now.Add(-time.Hour)))
		c.cum = append(c.cum, i+1)
	}
	rnd := rand.New(rand.NewPCG(5, 6))
	for range 500 {
		if b, _ := c.pick(now.UnixNano(), rnd, c.backends[1]); b == c.backends[1] {
			t.Fatal("picked the backend to avoid while others were usable")
		}
	}
	one := &cluster{cfg: Cluster{}, backends: c.backends[:1], cum: []int{1}}
	if b, _ := one.pick(now.UnixNano(), rnd, c.backends[0]); b != c.backends[0] {
		t.Fatal("the only backend must still be picked")
	}
}
