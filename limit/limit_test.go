package limit

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/internal/metrictest"
	"github.com/veerhq/veer/obs"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newTest(t testing.TB, cfg Config) (*Limiter, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	l, err := New(cfg, Options{Clock: clock.NewManual(t0), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	return l, reg
}

func TestGCRASteps(t *testing.T) {
	l, _ := newTest(t, Config{Dimensions: []Dimension{{Name: "tenant", Default: Limits{Rate: 10, Burst: 3}}}})
	keys := []string{"a"}
	steps := []struct {
		at      time.Duration
		allowed bool
		ra      time.Duration
	}{
		{0, true, 0}, {0, true, 0}, {0, true, 0}, // burst of 3
		{0, false, 100 * time.Millisecond},
		{50 * time.Millisecond, false, 50 * time.Millisecond},
		{100 * time.Millisecond, true, 0}, // one emission interval later
		{100 * time.Millisecond, false, 100 * time.Millisecond},
		{time.Second, true, 0}, {time.Second, true, 0}, {time.Second, true, 0}, // refilled to the burst, not beyond
		{time.Second, false, 100 * time.Millisecond},
	}
	for i, s := range steps {
		r := l.AllowAt(t0.Add(s.at), keys)
		if r.Allowed != s.allowed || r.RetryAfter != s.ra {
			t.Fatalf("step %d at %v: allowed %v retry-after %v, want %v %v", i, s.at, r.Allowed, r.RetryAfter, s.allowed, s.ra)
		}
		if !r.Allowed && (r.Dimension != "tenant" || r.Reason != Rate || r.Key != "a") {
			t.Fatalf("step %d: rejection %+v", i, r)
		}
	}
}

func TestAllDimensionsNoPartialConsumption(t *testing.T) {
	l, reg := newTest(t, Config{Dimensions: []Dimension{
		{Name: "tenant", Default: Limits{Rate: 1, Burst: 10, Concurrency: 5}},
		{Name: "api", Default: Limits{Rate: 1, Burst: 1}},
	}})
	now := t0
	first := l.AllowAt(now, []string{"a", "x"})
	if !first.Allowed {
		t.Fatal("first request rejected")
	}
	// api x is spent: 20 rejections by api must take nothing from tenant a
	// (neither its burst nor its concurrency slots).
	for range 20 {
		r := l.AllowAt(now, []string{"a", "x"})
		if r.Allowed || r.Dimension != "api" {
			t.Fatalf("want rejection by api, got %+v", r)
		}
	}
	// tenant a still has 9 of its burst and 4 free slots (one permit held
	// by the first request, never released).
	got, conc := 0, 0
	var permits []Result
	for i := range 20 {
		r := l.AllowAt(now, []string{"a", fmt.Sprint("api", i)})
		if r.Allowed {
			got++
			permits = append(permits, r)
		} else if r.Reason == Concurrency {
			conc++
		}
	}
	if got != 4 || conc != 16 {
		t.Fatalf("admitted %d, concurrency rejections %d; want 4 and 16", got, conc)
	}
	for i := range permits {
		permits[i].Permit.Release()
	}
	first.Permit.Release()
	got = 0
	for i := range 20 {
		if r := l.AllowAt(now, []string{"a", fmt.Sprint("b", i)}); r.Allowed {
			got++
		}
	}
	if got != 5 { // 9 - 4 = 5 left in tenant a's burst; slots free again
		t.Fatalf("after release admitted %d, want 5", got)
	}
	if errs := obs.Lint(reg); len(errs) > 0 {
		t.Fatal(errs)
	}
}

func TestOverridesAndEmptyKeys(t *testing.T) {
	l, _ := newTest(t, Config{Dimensions: []Dimension{{
		Name: "tenant", Default: Limits{Rate: 1, Burst: 1},
		Overrides: map[string]Limits{"acme": {Rate: 100, Burst: 50}, "free": {}},
	}}})
	count := func(key string) int {
		n := 0
		for range 200 {
			if r := l.AllowAt(t0, []string{key}); r.Allowed {
				n++
			}
		}
		return n
	}
	for key, want := range map[string]int{"acme": 50, "other": 1, "free": 200, "": 200} {
		if got := count(key); got != want {
			t.Errorf("key %q: admitted %d, want %d", key, got, want)
		}
	}
	if n := l.Keys("tenant"); n != 2 { // acme, other; "free" and "" keep no state
		t.Errorf("keys kept %d, want 2", n)
	}
}

func TestConcurrentExactness(t *testing.T) {
	l, _ := newTest(t, Config{Dimensions: []Dimension{
		{Name: "region", Default: Limits{Rate: 1, Burst: 300}},
		{Name: "tenant", Default: Limits{Rate: 1, Burst: 100}},
	}})
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				tenant := "t1"
				if (g+i)%2 == 0 {
					tenant = "t2"
				}
				if r := l.AllowAt(t0, []string{"eu", tenant}); r.Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	// Each tenant's burst is 100; region's 300 is not reached: exactly 200.
	if got := admitted.Load(); got != 200 {
		t.Fatalf("admitted %d, want exactly 200", got)
	}
}

func TestBoundedKeys(t *testing.T) {
	l, reg := newTest(t, Config{MaxKeys: 100, IdleTimeout: time.Second, Dimensions: []Dimension{{Name: "tenant", Default: Limits{Rate: 1, Burst: 2}}}})
	admitted := 0
	for i := range 10000 {
		if r := l.AllowAt(t0, []string{fmt.Sprint("k", i)}); r.Allowed {
			admitted++
		}
	}
	if n := l.Keys("tenant"); n != 100 {
		t.Fatalf("keys %d, want the cap 100", n)
	}
	// One request for each of the 100 kept keys, plus the shared overflow
	// entry's burst of 2 for the other 9900 keys: never unlimited.
	if admitted != 102 {
		t.Fatalf("admitted %d, want 102", admitted)
	}
	if got := metrictest.Sum(t, reg, "veer_limit_key_overflow_total", nil); got != 9900 {
		t.Fatalf("overflow counter %v, want 9900", got)
	}
	// Three seconds later the keys are idle with full buckets: new keys
	// evict them and get their own entries.
	later := t0.Add(3 * time.Second)
	for i := range 50 {
		if r := l.AllowAt(later, []string{fmt.Sprint("new", i)}); !r.Allowed {
			t.Fatalf("new key %d rejected after eviction", i)
		}
	}
	if got := metrictest.Sum(t, reg, "veer_limit_evicted_keys_total", nil); got < 50 {
		t.Fatalf("evicted %v, want ≥ 50", got)
	}
	if n := l.Keys("tenant"); n > 100 {
		t.Fatalf("keys %d over the cap", n)
	}
}

func TestEvictionKeepsDebt(t *testing.T) {
	// A key that is still paying for a burst is not evicted, even if idle.
	l, _ := newTest(t, Config{MaxKeys: 1, IdleTimeout: time.Second, Dimensions: []Dimension{{Name: "d", Default: Limits{Rate: 0.1, Burst: 1}}}})
	l.AllowAt(t0, []string{"a"}) // tat = t0 + 10 s
	l.Sweep(t0.Add(5 * time.Second))
	if l.Keys("d") != 1 {
		t.Fatal("key in debt evicted")
	}
	if r := l.AllowAt(t0.Add(5*time.Second), []string{"a"}); r.Allowed {
		t.Fatal("key admitted while in debt")
	}
	l.Sweep(t0.Add(11 * time.Second))
	if l.Keys("d") != 0 {
		t.Fatal("idle key with a full bucket kept")
	}
}

func TestNoAlloc(t *testing.T) {
	l, _ := newTest(t, Config{Dimensions: []Dimension{
		{Name: "tenant", Default: Limits{Rate: 1e6, Burst: 1000, Concurrency: 10}, Overrides: map[string]Limits{"x": {Rate: 5}}},
		{Name: "api", Default: Limits{Rate: 1e6}},
	}})
	keys := []string{"a", "b"}
	now := t0
	allocs := testing.AllocsPerRun(1000, func() {
		now = now.Add(time.Microsecond)
		r := l.AllowAt(now, keys)
		r.Permit.Release()
	})
	if allocs != 0 {
		t.Fatalf("AllowAt allocates %v times", allocs)
	}
}

func TestUpdateKeepsState(t *testing.T) {
	l, _ := newTest(t, Config{Dimensions: []Dimension{{Name: "tenant", Default: Limits{Rate: 1, Burst: 2}}}})
	l.AllowAt(t0, []string{"a"})
	l.AllowAt(t0, []string{"a"})
	if err := l.Apply(Config{Dimensions: []Dimension{{Name: "tenant", Default: Limits{Rate: 1, Burst: 3}}}}); err != nil {
		t.Fatal(err)
	}
	// The spent burst carries over: one more with burst 3.
	if r := l.AllowAt(t0, []string{"a"}); !r.Allowed {
		t.Fatal("third request rejected after raising the burst to 3")
	}
	if r := l.AllowAt(t0, []string{"a"}); r.Allowed {
		t.Fatal("fourth request admitted")
	}
	if err := l.Apply(Config{Dimensions: []Dimension{{Name: ""}}}); err == nil {
		t.Fatal("invalid update accepted")
	}
}

func TestScale(t *testing.T) {
	got := Limits{Rate: 100, Burst: 40, Concurrency: 10}.Scale(4)
	if got != (Limits{Rate: 25, Burst: 10, Concurrency: 2}) {
		t.Fatalf("Scale(4) = %+v", got)
	}
	if got := (Limits{Rate: 1, Concurrency: 1}).Scale(8); got != (Limits{Rate: 0.125, Burst: 1, Concurrency: 1}) {
		t.Fatalf("Scale(8) of a tiny limit = %+v, want never zero", got)
	}
}

func FuzzConfig(f *testing.F) {
	f.Add([]byte(`dimensions:
  - name: tenant
    default: {rate: 100, burst: 200, concurrency: 50}
    overrides:
      acme: {rate: 1000}
  - name: api
    default: {rate: 10}
max_keys: 1000
idle_timeout: 30s
max_request_body: 1048576
`))
	f.Add([]byte(`{"dimensions": [{"name": "x", "default": {"rate": 1e10}}]}`))
	f.Add([]byte("dimensions: [{name: a}, {name: a}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c Config
		if err := config.Parse(data, "fuzz.yaml", &c); err != nil {
			return
		}
		l, err := New(c, Options{Clock: clock.NewManual(t0), Registerer: prometheus.NewRegistry()})
		if err != nil {
			t.Fatalf("valid config rejected by New: %v", err)
		}
		keys := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
		for range 3 {
			r := l.AllowAt(t0, keys)
			r.Permit.Release()
		}
		if sc := c.Scale(3); sc.Validate() != nil {
			t.Fatalf("scaled valid config invalid: %v", sc.Validate())
		}
	})
}

func ExampleLimiter() {
	l, _ := New(Config{Dimensions: []Dimension{
		{Name: "tenant", Default: Limits{Rate: 100, Burst: 100}},
		{Name: "function", Default: Limits{Concurrency: 1}},
	}}, Options{Clock: clock.NewManual(t0), Registerer: prometheus.NewRegistry()})
	first := l.AllowAt(t0, []string{"acme", "resize-image"})
	second := l.AllowAt(t0, []string{"acme", "resize-image"})
	fmt.Println(first.Allowed, second.Allowed, second.Dimension, second.Reason, second.RetryAfter)
	first.Permit.Release()
	third := l.AllowAt(t0, []string{"acme", "resize-image"})
	fmt.Println(third.Allowed)
	// Output:
	// true false function concurrency 1s
	// true
}

func BenchmarkAllowAt1Dim(b *testing.B) {
	l, _ := newTest(b, Config{Dimensions: []Dimension{{Name: "tenant", Default: Limits{Rate: 1e9, Burst: 1000}}}})
	keys := []string{"acme"}
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Microsecond)
		l.AllowAt(now, keys)
	}
}

func BenchmarkAllowAt3Dims(b *testing.B) {
	l, _ := newTest(b, Config{Dimensions: []Dimension{
		{Name: "region", Default: Limits{Rate: 1e9, Burst: 1000}},
		{Name: "tenant", Default: Limits{Rate: 1e9, Burst: 1000, Concurrency: 100}},
		{Name: "api", Default: Limits{Rate: 1e9, Burst: 1000}},
	}})
	keys := []string{"eu", "acme", "invoke"}
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Microsecond)
		r := l.AllowAt(now, keys)
		r.Permit.Release()
	}
}

// TestExampleFile keeps the YAML shown in docs/guard.md valid.
func TestExampleFile(t *testing.T) {
	var c Config
	if err := config.Load("testdata/limits.yaml", &c); err != nil {
		t.Fatal(err)
	}
	l, _ := newTest(t, c)
	if got := l.Dimensions(); fmt.Sprint(got) != "[region tenant function]" {
		t.Fatalf("dimensions %v", got)
	}
	if l.MaxRequestBody() != 6<<20 {
		t.Fatalf("max_request_body %d", l.MaxRequestBody())
	}
	// internal-batch has no tenant limit; function still caps it at 10.
	n := 0
	for range 20 {
		if r := l.AllowAt(t0, []string{"eu", "internal-batch", "f"}); r.Allowed {
			n++
		}
	}
	if n != 10 {
		t.Fatalf("admitted %d, want the function's 10 slots", n)
	}
}
