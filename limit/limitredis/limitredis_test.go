package limitredis

import (
	"context"
	"fmt"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/internal/metrictest"
	"github.com/veerhq/veer/internal/redistest"
	"github.com/veerhq/veer/limit"
	"github.com/veerhq/veer/limit/limittest"
	"github.com/veerhq/veer/obs"
)

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	// go-redis keeps a dialer goroutine for up to a second after a failed
	// dial to a dead server; it exits on its own once the pool is closed.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("time.Sleep"), goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// client returns a go-redis client set up as the package comment advises:
// short timeouts, no retries. timeout is 200ms unless given.
func client(t testing.TB, addr string, timeout ...time.Duration) *redis.Client {
	t.Helper()
	to := 200 * time.Millisecond
	if len(timeout) > 0 {
		to = timeout[0]
	}
	c := redis.NewClient(&redis.Options{
		Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1,
		DialTimeout: to, ReadTimeout: to, WriteTimeout: to,
		PoolSize: 8,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

func newLimiter(t testing.TB, cfg Config, addr string, opts Options) (*Limiter, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	opts.Registerer = reg
	if opts.Logger == nil {
		opts.Logger = obs.Discard
	}
	l, err := New(cfg, client(t, addr, max(cfg.Timeout, 200*time.Millisecond)), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, reg
}

// hammer runs g goroutines on each limiter, deciding for keys until stop
// closes, and returns the admissions per limiter.
func hammer(ls []*Limiter, g int, keys []string, stop <-chan struct{}, onResult func(i int, r limit.Result)) []int64 {
	counts := make([]int64, len(ls))
	var wg sync.WaitGroup
	for i, l := range ls {
		for range g {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					r := l.Admit(context.Background(), keys)
					if onResult != nil {
						onResult(i, r)
					}
					if r.Allowed {
						atomic.AddInt64(&counts[i], 1)
						r.Permit.Release()
					}
				}
			})
		}
	}
	wg.Wait()
	return counts
}

func TestSharedRateAccuracy(t *testing.T) {
	srv := redistest.Start(t)
	// A burst of two seconds' worth: a stall of the hammers shorter than
	// that (GC, a busy 2-core machine) loses no tokens, so the count
	// measures the limiter, not the load generator.
	const rate, burst = 250.0, 500
	cfg := Config{Instances: 4, Limits: limit.Config{Dimensions: []limit.Dimension{{Name: "tenant", Default: limit.Limits{Rate: rate, Burst: burst}}}}}
	// Generous timeouts: this test is about accuracy, and a decision that
	// times out after Redis applied it counts in Redis but not here (the
	// inherent ambiguity of a timeout), which a busy 2-core machine would
	// turn into noise.
	cfg.Timeout = 2 * time.Second
	var ls []*Limiter
	var regs []*prometheus.Registry
	for range 4 {
		l, reg := newLimiter(t, cfg, srv.Addr(), Options{})
		ls = append(ls, l)
		regs = append(regs, reg)
	}
	// Warm up: connections dialled, script loaded, on another key.
	for _, l := range ls {
		if r := l.Admit(context.Background(), []string{"warm-up"}); !r.Allowed {
			t.Fatal("warm-up rejected")
		}
	}
	var decisions atomic.Int64
	// The span measured is that of the admissions themselves, in Redis
	// server time, so that a stall of the test process at either end does
	// not move it.
	var mu sync.Mutex
	first, last := int64(math.MaxInt64), int64(0)
	testHookAdmitted = func(us int64) {
		mu.Lock()
		first, last = min(first, us), max(last, us)
		mu.Unlock()
	}
	defer func() { testHookAdmitted = nil }()
	stop := make(chan struct{})
	time.AfterFunc(2*time.Second, func() { close(stop) })
	counts := hammer(ls, 3, []string{"acme"}, stop, func(int, limit.Result) { decisions.Add(1) })
	testHookAdmitted = nil
	for i, reg := range regs {
		if n := metricValue(t, reg, "veer_limitredis_errors_total"); n != 0 {
			t.Fatalf("instance %d: %v Redis errors during the run", i, n)
		}
	}
	var admitted int64
	for _, c := range counts {
		admitted += c
	}
	for _, l := range ls {
		if l.InFallback() {
			t.Fatal("a limiter fell back during the run")
		}
	}
	// The limit over the span of the admissions is burst + rate·span. The
	// hammers may leave some of it unasked for at the very end (a stall of
	// this busy machine just before they stop): the tokens left in the
	// bucket at the last admission, read from the key's final theoretical
	// arrival time. Tokens lost in the middle of the run are not excused.
	tatFinal, err := client(t, srv.Addr()).Get(context.Background(), "veer:limit:r:tenant:acme").Int64()
	if err != nil {
		t.Fatal(err)
	}
	const T = int64(1e6 / rate)
	elapsed := float64(last-first) / 1e6
	limitAll := burst + rate*elapsed
	unused := float64(last+int64(burst)*T-tatFinal) / float64(T)
	want := limitAll - unused
	t.Logf("decisions %d (%.0f/s over 4 instances), admitted %d over %.3fs of Redis time; limit %.1f, of which %.1f left unasked at the end; per instance %v",
		decisions.Load(), float64(decisions.Load())/elapsed, admitted, elapsed, limitAll, unused, counts)
	if decisions.Load() < int64(2*limitAll) {
		t.Fatalf("only %d decisions: the load did not exceed the limit", decisions.Load())
	}
	if float64(admitted) > limitAll+1 {
		t.Fatalf("admitted %d, over the limit %.1f", admitted, limitAll)
	}
	if unused > 0.2*limitAll {
		t.Fatalf("%.1f tokens unasked for at the end: the load generator stalled, the run measures nothing", unused)
	}
	if diff := float64(admitted) - want; diff > 0.01*limitAll || diff < -0.01*limitAll {
		t.Fatalf("admitted %d, want within 1%% of %.1f", admitted, want)
	}
}

func TestAllDimensionsAtomic(t *testing.T) {
	srv := redistest.Start(t)
	l, reg := newLimiter(t, Config{Timeout: 2 * time.Second, Limits: limit.Config{Dimensions: []limit.Dimension{
		{Name: "tenant", Default: limit.Limits{Rate: 0.01, Burst: 10}},
		{Name: "api", Default: limit.Limits{Rate: 0.01, Burst: 1}},
	}}}, srv.Addr(), Options{})
	ctx := context.Background()
	if r := l.Admit(ctx, []string{"a", "x"}); !r.Allowed {
		t.Fatal("first request rejected")
	}
	for range 20 {
		r := l.Admit(ctx, []string{"a", "x"})
		if r.Allowed || r.Dimension != "api" || r.Reason != limit.Rate || r.RetryAfter < 90*time.Second {
			t.Fatalf("want a rate rejection by api with Retry-After ≈ 100 s, got %+v", r)
		}
	}
	got := 0
	for i := range 20 {
		if r := l.Admit(ctx, []string{"a", string(rune('A' + i))}); r.Allowed {
			got++
		}
	}
	if got != 9 {
		t.Fatalf("tenant a admitted %d more, want 9 (its burst untouched by api's rejections)", got)
	}
	if errs := obs.Lint(reg); len(errs) > 0 {
		t.Fatal(errs)
	}
}

func TestConcurrencyLeases(t *testing.T) {
	srv := redistest.Start(t)
	cfg := Config{Timeout: 2 * time.Second, LeaseTTL: 300 * time.Millisecond, ProbeInterval: 50 * time.Millisecond, Limits: limit.Config{Dimensions: []limit.Dimension{{Name: "function", Default: limit.Limits{Concurrency: 3}}}}}
	a, _ := newLimiter(t, cfg, srv.Addr(), Options{})
	b, _ := newLimiter(t, cfg, srv.Addr(), Options{})
	ctx := context.Background()
	keys := []string{"resize"}
	var held []limit.Result
	for _, l := range []*Limiter{a, a, b} {
		r := l.Admit(ctx, keys)
		if !r.Allowed {
			t.Fatal("slot refused below the cap")
		}
		held = append(held, r)
	}
	if r := b.Admit(ctx, keys); r.Allowed || r.Reason != limit.Concurrency || r.Dimension != "function" {
		t.Fatalf("fourth slot: %+v, want a concurrency rejection", r)
	}
	held[2].Permit.Release() // b's slot
	r := b.Admit(ctx, keys)
	if !r.Allowed {
		t.Fatal("slot not given back by Release")
	}
	// Instance a holds two slots for longer than the TTL: its renewals keep
	// them. Then a "crashes" (stops renewing, never releases): after the
	// TTL its slots come back.
	<-time.After(2 * cfg.LeaseTTL)
	if r := b.Admit(ctx, keys); r.Allowed {
		t.Fatal("renewed leases of a live instance expired")
	}
	a.Close()
	<-time.After(cfg.LeaseTTL + 100*time.Millisecond)
	got := 0
	for range 3 {
		if r := b.Admit(ctx, keys); r.Allowed {
			got++
		}
	}
	if got != 2 {
		t.Fatalf("after the crashed instance's TTL: %d slots, want its 2", got)
	}
	if a.InFallback() || b.InFallback() {
		t.Fatal("a limiter fell back: the test did not exercise Redis")
	}
}

func TestFallbackWhenRedisDies(t *testing.T) {
	srv := redistest.Start(t)
	fallbackScenario(t, srv, srv.Kill, srv.Restart)
}

// TestFallbackWhenRedisHangs freezes Redis (SIGSTOP): connections stay
// open and nothing answers, so only the decision timeout detects it.
func TestFallbackWhenRedisHangs(t *testing.T) {
	srv := redistest.Start(t)
	fallbackScenario(t, srv, srv.Pause, srv.Resume)
}

// fallbackScenario hammers 4 instances, applies fault after 1 s, checks the
// fallback and the absence of an unlimited window, then heals Redis and
// waits for every instance to recover.
func fallbackScenario(t *testing.T, srv *redistest.Server, fault, heal func()) {
	const rate, burst = 400.0, 40
	var mu sync.Mutex
	var fellBack [4]time.Time // last switch to fallback per instance
	changed := make(chan bool, 64)
	cfg := Config{Instances: 4, Timeout: 300 * time.Millisecond, ProbeInterval: 100 * time.Millisecond, Limits: limit.Config{Dimensions: []limit.Dimension{{Name: "tenant", Default: limit.Limits{Rate: rate, Burst: burst}}}}}
	var ls []*Limiter
	var regs []*prometheus.Registry
	for i := range 4 {
		l, reg := newLimiter(t, cfg, srv.Addr(), Options{OnFallback: func(fb bool) {
			mu.Lock()
			if fb {
				fellBack[i] = time.Now()
			}
			mu.Unlock()
			changed <- fb
		}})
		ls = append(ls, l)
		regs = append(regs, reg)
	}
	// Admissions per 100 ms slot of wall time, across the instances, to
	// show there is no unlimited window.
	// The fault comes after 1 s and the run ends 2 s after the fault,
	// however late a busy machine fires the timers. An instance that had
	// already fallen back (a decision timed out under load before the
	// fault) is in fallback at the fault: nothing to switch.
	start := time.Now()
	var slots [128]atomic.Int64
	stop := make(chan struct{})
	var killedAt, stopAt time.Time
	var wasInFallback [4]bool
	faulted := make(chan struct{})
	time.AfterFunc(time.Second, func() {
		for i, l := range ls {
			wasInFallback[i] = l.InFallback()
		}
		killedAt = time.Now()
		fault()
		close(faulted)
		time.AfterFunc(2*time.Second, func() { stopAt = time.Now(); close(stop) })
	})
	hammer(ls, 2, []string{"acme"}, stop, func(_ int, r limit.Result) {
		if r.Allowed {
			if s := int(time.Since(start) / (100 * time.Millisecond)); s < len(slots) {
				slots[s].Add(1)
			}
		}
	})
	<-faulted
	if late := time.Since(stopAt); late > time.Second {
		t.Errorf("the last decision ended %v after the run's end: Admit blocked", late)
	}
	mu.Lock()
	fb := fellBack
	mu.Unlock()
	for i, at := range fb {
		if wasInFallback[i] {
			continue
		}
		if d := at.Sub(killedAt); d < 0 || d > time.Second {
			t.Errorf("instance %d fell back %v after Redis died, want ≤ 1 s", i, d)
		}
	}
	// Never unlimited: in any 100 ms slot the fleet admits at most the
	// burst plus 100 ms of rate, with Redis (shared) or without it
	// (4 × burst/4 plus 4 × rate/4 per instance). The slot of the switch
	// may hold Redis's admissions and the locals' fresh bursts and rate:
	// 2 × burst + 2 × 100 ms of rate at worst.
	maxSlot := int64(0)
	var total int64
	for i := range slots {
		n := slots[i].Load()
		total += n
		maxSlot = max(maxSlot, n)
	}
	if limitPerSlot := int64(2*burst + 2*rate/10); maxSlot > limitPerSlot {
		t.Fatalf("a 100 ms slot admitted %d, more than %d", maxSlot, limitPerSlot)
	}
	run := stopAt.Sub(start).Seconds()
	if upper := int64(3*burst + rate*(run+0.2)); total > upper {
		t.Fatalf("admitted %d in %.1f s, over %d", total, run, upper)
	}
	for _, l := range ls {
		if !l.InFallback() {
			t.Fatal("instance not in fallback while Redis is down")
		}
	}
	t.Logf("fallback delays after kill: %v; admitted %d; max per 100 ms %d", func() []time.Duration {
		var ds []time.Duration
		for _, at := range fb {
			ds = append(ds, at.Sub(killedAt))
		}
		return ds
	}(), total, maxSlot)

	// Redis returns: every instance recovers through its probe.
	for len(changed) > 0 {
		<-changed
	}
	heal()
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for back := 0; back < 4; {
		select {
		case v := <-changed:
			if !v {
				back++
			}
		case <-timeout.C:
			t.Fatalf("only %d of 4 instances recovered within 10 s", back)
		}
	}
	if r := ls[0].Admit(context.Background(), []string{"acme"}); !r.Allowed {
		t.Fatal("fresh Redis rejected the first request")
	}
	if ls[0].InFallback() {
		t.Fatal("decision after recovery was local")
	}
	for i, reg := range regs {
		fb, rec := metricValue(t, reg, "veer_limitredis_fallbacks_total"), metricValue(t, reg, "veer_limitredis_recoveries_total")
		if fb < 1 || rec != fb {
			t.Errorf("instance %d: fallbacks %v recoveries %v, want as many recoveries as fallbacks", i, fb, rec)
		}
		if errs := obs.Lint(reg); len(errs) > 0 {
			t.Error(errs)
		}
	}
}

func TestFallbackUnreachableFromStart(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	l, reg := newLimiter(t, Config{Instances: 4, Limits: limit.Config{Dimensions: []limit.Dimension{{Name: "tenant", Default: limit.Limits{Rate: 0.01, Burst: 8, Concurrency: 8}}}}}, addr, Options{})
	got := 0
	for range 10 {
		if r := l.Admit(context.Background(), []string{"acme"}); r.Allowed {
			got++
		}
	}
	if got != 2 {
		t.Fatalf("admitted %d with Redis down, want 8 ÷ 4 = 2 (never unlimited)", got)
	}
	if !l.InFallback() {
		t.Fatal("not in fallback")
	}
	if errs := obs.Lint(reg); len(errs) > 0 {
		t.Fatal(errs)
	}
}

func FuzzConfig(f *testing.F) {
	f.Add([]byte("instances: 4\ntimeout: 50ms\nlease_ttl: 30s\nlimits:\n  dimensions:\n    - name: tenant\n      default: {rate: 100}\n"))
	f.Add([]byte(`{"lease_ttl": "1ms"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c Config
		if err := config.Parse(data, "fuzz.yaml", &c); err != nil {
			return
		}
		d := c.withDefaults()
		if d.Instances < 1 || d.Timeout <= 0 || d.LeaseTTL < 30*time.Millisecond {
			t.Fatalf("defaults not applied: %+v", d)
		}
	})
}

func metricValue(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	return metrictest.Sum(t, g, name, nil)
}

func TestContract(t *testing.T) {
	srv := redistest.Start(t)
	n := 0
	limittest.Contract(t, func(t *testing.T, cfg limit.Config) limit.Admitter {
		n++
		l, _ := newLimiter(t, Config{Timeout: 2 * time.Second, Prefix: fmt.Sprintf("contract%d:", n), Limits: cfg}, srv.Addr(), Options{})
		t.Cleanup(func() {
			if l.InFallback() {
				t.Error("the limiter fell back: the contract ran on local limits, not Redis")
			}
		})
		return l
	})
}

// BenchmarkAdmit is one decision through a local redis-server (client
// allocations and round trip); bench/cmd/guardbench compares it with
// redis_rate.
func BenchmarkAdmit(b *testing.B) {
	srv := redistest.Start(b)
	l, _ := newLimiter(b, Config{Timeout: time.Second, Limits: limit.Config{Dimensions: []limit.Dimension{
		{Name: "tenant", Default: limit.Limits{Rate: 1e6, Burst: 1000}},
	}}}, srv.Addr(), Options{})
	keys := []string{"acme"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if r := l.Admit(ctx, keys); !r.Allowed {
			b.Fatal("rejected")
		}
	}
}
