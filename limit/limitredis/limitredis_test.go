package limitredis

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"syscall"
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
	// Drain the burst first: a full bucket is where a stall of the hammers
	// would lose tokens (a bucket that stays full gains nothing), so the
	// run starts with an empty one, 2 s of stall away from full.
	for i := 0; ; i++ {
		if i > 2*burst {
			t.Fatal("burst never drained")
		}
		if r := ls[0].Admit(context.Background(), []string{"acme"}); !r.Allowed {
			break
		}
	}
	// The bucket held less than one token at the drain's rejection, but it
	// fills while the hammers start: on a busy machine their first
	// admission may come several emission intervals later, with more than
	// one token there. The key's TAT after the drain says how many.
	const key = "veer:limit:r:6:tenant:acme"
	rdb := client(t, srv.Addr(), 2*time.Second)
	tatDrained := readTAT(t, rdb, key)
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
	// GCRA admits at time t while the bucket holds a whole token, and the
	// bucket holds (tau − max(TAT − t, 0))/T tokens. So over the span of
	// the admissions the limit is exactly what the bucket held at the first
	// one (one token, or a few more if the hammers started late after the
	// drain) plus the rate times the span. The hammers may also leave some
	// of it unasked for at the very end (a stall of this busy machine just
	// before they stop): the tokens left in the bucket at the last
	// admission, read from the key's final TAT. Tokens lost in the middle
	// of the run are not excused.
	tatFinal := readTAT(t, rdb, key)
	const T = int64(1e6 / rate)
	elapsed := float64(last-first) / 1e6
	atFirst := float64(int64(burst)*T-max(tatDrained-first, 0)) / float64(T)
	limitAll := atFirst + rate*elapsed
	unused := float64(last+int64(burst)*T-tatFinal) / float64(T)
	want := limitAll - unused
	t.Logf("decisions %d (%.0f/s over 4 instances), admitted %d over %.3fs of Redis time; limit %.2f (%.2f tokens at the first admission), of which %.1f left unasked at the end; per instance %v",
		decisions.Load(), float64(decisions.Load())/elapsed, admitted, elapsed, limitAll, atFirst, unused, counts)
	if decisions.Load() < int64(2*limitAll) {
		t.Fatalf("only %d decisions: the load did not exceed the limit", decisions.Load())
	}
	// Admission times are whole microseconds: 2 µs of slack is 0.0005 of
	// a token.
	if float64(admitted) > limitAll+0.001 {
		t.Fatalf("admitted %d, over the limit %.3f", admitted, limitAll)
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
	r.Permit.Release()
	// Instance a "crashes" holding two slots (no renewal, no release):
	// they come back when their TTL has passed in Redis's time. The script
	// is fed times around the expiry rather than waiting for it.
	a.Close()
	rdb := client(t, srv.Addr())
	zs, err := rdb.ZRangeWithScores(ctx, a.snap.Load().dims[0].cprefix+"resize", 0, -1).Result()
	if err != nil || len(zs) != 2 {
		t.Fatalf("lease set: %v %v, want a's two leases", zs, err)
	}
	first, last := int64(min(zs[0].Score, zs[1].Score)), int64(max(zs[0].Score, zs[1].Score)) // µs since the epoch
	count := func(us int64) int {
		got := 0
		for range 3 {
			if decideAt(t, b, rdb, keys, us*1000) {
				got++
			}
		}
		return got
	}
	if got := count(first - 1); got != 1 {
		t.Fatalf("1 µs before the crashed instance's leases expire: %d slots, want the 1 it left", got)
	}
	if _, err := rdb.Del(ctx, a.snap.Load().dims[0].cprefix+"resize").Result(); err != nil {
		t.Fatal(err)
	}
	for _, z := range zs { // a's leases again, without those just taken
		rdb.ZAdd(ctx, a.snap.Load().dims[0].cprefix+"resize", z)
	}
	if got := count(last); got != 3 {
		t.Fatalf("once the crashed instance's leases expired: %d slots, want all 3", got)
	}
	if a.InFallback() || b.InFallback() {
		t.Fatal("a limiter fell back: the test did not exercise Redis")
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

// readTAT returns a GCRA key's theoretical arrival time in µs since the
// epoch (the script stores "<seconds> <nanoseconds>").
func readTAT(t *testing.T, rdb *redis.Client, key string) int64 {
	t.Helper()
	v, err := rdb.Get(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	var sec int64
	var ns float64
	if _, err := fmt.Sscanf(v, "%d %g", &sec, &ns); err != nil {
		t.Fatalf("TAT %q: %v", v, err)
	}
	return sec*1e6 + int64(ns/1e3)
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

// BenchmarkAdmit is one decision at a time through a local redis-server
// (client allocations and a round trip each).
func BenchmarkAdmit(b *testing.B) { benchAdmit(b, 1) }

// BenchmarkAdmitParallel is 16 goroutines deciding at once: the decisions
// that arrive together go to Redis in one script call.
func BenchmarkAdmitParallel(b *testing.B) { benchAdmit(b, 8) }

// benchAdmit reports, beside ns/op and allocs/op, the CPU time per decision
// of this process (client-cpu-ns/op: the limiter, go-redis and the
// benchmark's goroutines) and of redis-server (redis-cpu-ns/op, 10 ms
// resolution): on a shared machine these move less than ns/op.
func benchAdmit(b *testing.B, parallelism int) {
	srv := redistest.Start(b)
	l, _ := newLimiter(b, Config{Timeout: time.Second, Limits: limit.Config{Dimensions: []limit.Dimension{
		{Name: "tenant", Default: limit.Limits{Rate: 1e9, Burst: 1000}},
	}}}, srv.Addr(), Options{})
	ctx := context.Background()
	if r := l.Admit(ctx, []string{"warm-up"}); !r.Allowed {
		b.Fatal("rejected")
	}
	b.ReportAllocs()
	b.SetParallelism(parallelism)
	c0, r0 := selfCPU(), redisCPU(b, srv)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		keys := []string{"acme"}
		for pb.Next() {
			if r := l.Admit(ctx, keys); !r.Allowed {
				b.Error("rejected")
				return
			}
		}
	})
	b.StopTimer()
	c1, r1 := selfCPU(), redisCPU(b, srv)
	b.ReportMetric(float64(c1-c0)/float64(b.N), "client-cpu-ns/op")
	b.ReportMetric(float64(r1-r0)/float64(b.N), "redis-cpu-ns/op")
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func redisCPU(b *testing.B, srv *redistest.Server) time.Duration {
	d, err := srv.CPU()
	if err != nil {
		b.Fatal(err)
	}
	return d
}
