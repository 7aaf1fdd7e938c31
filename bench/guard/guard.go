// Package guard compares veer's flow-control packages with their peers,
// side by side in one process: limit against golang.org/x/time/rate,
// breaker against sony/gobreaker/v2, limit/limitredis against
// go-redis/redis_rate/v10 on a local redis-server. The Go benchmarks in
// guard_test.go give ns/op and allocs; cmd/guardbench alternates the
// contenders over several rounds and prints ratios.
package guard

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/veerhq/veer/limit"
	"github.com/veerhq/veer/limit/limitredis"
)

// Decider is one distributed-limit contender: one decision for key.
type Decider func(ctx context.Context, key string) (allowed bool, err error)

// Client returns a go-redis client for a contender.
func Client(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64, MaxRetries: 1, ContextTimeoutEnabled: true})
}

// VeerRedis returns veer's limitredis as a Decider with rate per second
// and burst.
func VeerRedis(rdb *redis.Client, rate, burst int) (Decider, func(), error) {
	l, err := limitredis.New(limitredis.Config{Timeout: time.Second, Limits: limit.Config{Dimensions: []limit.Dimension{
		{Name: "tenant", Default: limit.Limits{Rate: float64(rate), Burst: burst}},
	}}}, rdb, limitredis.Options{Registerer: prometheus.NewRegistry()})
	if err != nil {
		return nil, nil, err
	}
	return func(ctx context.Context, key string) (bool, error) {
		r := l.Admit(ctx, []string{key})
		if l.InFallback() {
			return r.Allowed, errors.New("veer limitredis fell back to local limits")
		}
		if r.Allowed {
			r.Permit.Release()
		}
		return r.Allowed, nil
	}, func() { l.Close() }, nil
}

// RedisRate returns go-redis/redis_rate as a Decider with rate per second
// and burst.
func RedisRate(rdb *redis.Client, rate, burst int) Decider {
	l := redis_rate.NewLimiter(rdb)
	lim := redis_rate.Limit{Rate: rate, Burst: burst, Period: time.Second}
	return func(ctx context.Context, key string) (bool, error) {
		r, err := l.Allow(ctx, key, lim)
		if err != nil {
			return false, err
		}
		return r.Allowed > 0, nil
	}
}

// LoadResult is one load run.
type LoadResult struct {
	Decisions int64
	Errors    int64
	PerSecond float64
	P50, P99  time.Duration
}

// ClosedLoop runs workers deciding as fast as they can for d.
func ClosedLoop(dec Decider, workers int, d time.Duration, keys []string) LoadResult {
	var n, errs atomic.Int64
	lats := make([][]time.Duration, workers)
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline); i++ {
				t := time.Now()
				_, err := dec(context.Background(), keys[(w+i)%len(keys)])
				lats[w] = append(lats[w], time.Since(t))
				n.Add(1)
				if err != nil {
					errs.Add(1)
				}
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	return summarize(n.Load(), errs.Load(), el, lats)
}

// OpenLoop sends decisions at a fixed rate for d, measuring latency from
// each decision's intended start (no coordinated omission). Workers bound
// the concurrency; a decision that waits for a worker counts that wait.
func OpenLoop(dec Decider, rate, workers int, d time.Duration, keys []string) LoadResult {
	total := int(float64(rate) * d.Seconds())
	start := time.Now().Add(10 * time.Millisecond)
	interval := time.Second / time.Duration(rate)
	var next atomic.Int64
	var errs atomic.Int64
	lats := make([][]time.Duration, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(total) {
					return
				}
				intended := start.Add(time.Duration(i) * interval)
				if wait := time.Until(intended); wait > 0 {
					time.Sleep(wait) // pacing the generator, not waiting for a result
				}
				_, err := dec(context.Background(), keys[int(i)%len(keys)])
				lats[w] = append(lats[w], time.Since(intended))
				if err != nil {
					errs.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return summarize(int64(total), errs.Load(), time.Since(start), lats)
}

func summarize(n, errs int64, el time.Duration, lats [][]time.Duration) LoadResult {
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	slices.Sort(all)
	r := LoadResult{Decisions: n, Errors: errs, PerSecond: float64(n) / el.Seconds()}
	if len(all) > 0 {
		r.P50 = all[len(all)/2]
		r.P99 = all[len(all)*99/100]
	}
	return r
}

// Admission is a run against a limit that binds.
type Admission struct {
	Decisions, Admitted int64
	Elapsed             time.Duration
	// Allowed is what the limit allows over Elapsed: burst + rate·Elapsed.
	Allowed float64
	// Over is Admitted/Allowed − 1: the over-admission (negative: under).
	Over float64
}

// OverAdmission runs workers deciding as fast as they can on one key whose
// limit (rate per second, burst) is far below the load, for d, and
// compares the admissions with what the limit allows. The contender's
// limiter must be fresh for key (a new key per run).
func OverAdmission(dec Decider, workers int, d time.Duration, key string, rate, burst int) Admission {
	var n, ok atomic.Int64
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				a, err := dec(context.Background(), key)
				n.Add(1)
				if a && err == nil {
					ok.Add(1)
				}
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	allowed := float64(burst) + float64(rate)*el.Seconds()
	return Admission{Decisions: n.Load(), Admitted: ok.Load(), Elapsed: el, Allowed: allowed, Over: float64(ok.Load())/allowed - 1}
}
