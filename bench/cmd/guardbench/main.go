// Command guardbench compares veer's flow-control packages with their peers
// in one run, alternating the contenders (A B A B …) over several rounds and
// printing the median, the spread and the ratio to the peer:
//
//	limit (local decision)      vs golang.org/x/time/rate
//	breaker (Allow + done)      vs sony/gobreaker/v2 TwoStepCircuitBreaker
//	limit/limitredis (shared)   vs go-redis/redis_rate/v10, on a redis-server it starts
//
// Usage: go run ./cmd/guardbench [-rounds 5] [-what local,breaker,redis] [-d 2s]
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/veerhq/veer/bench/guard"
)

func main() {
	rounds := flag.Int("rounds", 5, "rounds per comparison (contenders alternate)")
	what := flag.String("what", "local,breaker,redis", "comparisons to run")
	dur := flag.Duration("d", 2*time.Second, "duration of each Redis load run")
	orate := flag.Int("rate", 20000, "open-loop decision rate per instance for the Redis comparison")
	flag.Parse()
	fmt.Printf("# guardbench: GOMAXPROCS=%d, %d rounds, %s\n\n", runtime.GOMAXPROCS(0), *rounds, time.Now().UTC().Format(time.RFC3339))
	for _, w := range strings.Split(*what, ",") {
		switch w {
		case "local":
			micro("local limit decision (explicit time, 1 dimension) vs one unkeyed x/time/rate limiter", *rounds, guard.LimitVeer1Dim, guard.LimitXTimeRate)
			micro("local limit decision (explicit time, 1 dimension) vs x/time/rate per key (map under a RWMutex)", *rounds, guard.LimitVeer1Dim, guard.LimitXTimeRateKeyed)
		case "breaker":
			micro("breaker Allow + done (wall clock)", *rounds, guard.BreakerVeer, guard.BreakerGobreaker)
		case "redis":
			if err := redisCompare(*rounds, *dur, *orate); err != nil {
				fmt.Fprintln(os.Stderr, "guardbench:", err)
				os.Exit(1)
			}
		}
	}
}

func micro(title string, rounds int, veer, peer func(*testing.B)) {
	var v, p []float64
	var va, pa int64
	for range rounds {
		rv := testing.Benchmark(veer)
		rp := testing.Benchmark(peer)
		v = append(v, float64(rv.NsPerOp()))
		p = append(p, float64(rp.NsPerOp()))
		va, pa = rv.AllocsPerOp(), rp.AllocsPerOp()
	}
	ratios := make([]float64, rounds)
	for i := range v {
		ratios[i] = v[i] / p[i]
	}
	fmt.Printf("## %s\n\n| contender | ns/op median | min..max | allocs/op |\n|---|---|---|---|\n", title)
	fmt.Printf("| veer | %.1f | %.1f..%.1f | %d |\n", median(v), slices.Min(v), slices.Max(v), va)
	fmt.Printf("| peer | %.1f | %.1f..%.1f | %d |\n", median(p), slices.Min(p), slices.Max(p), pa)
	fmt.Printf("\nveer/peer time ratio per round: median %.2f (min %.2f, max %.2f)\n\n", median(ratios), slices.Min(ratios), slices.Max(ratios))
}

func redisCompare(rounds int, d time.Duration, orate int) error {
	srv, err := guard.StartRedis()
	if err != nil {
		return err
	}
	defer srv.Stop()
	veerClient, peerClient := guard.Client(srv.Addr), guard.Client(srv.Addr)
	defer veerClient.Close()
	defer peerClient.Close()
	const limitRate = 1000000 // high: measure the decision, not the rejections
	veer, closeVeer, err := guard.VeerRedis(veerClient, limitRate)
	if err != nil {
		return err
	}
	defer closeVeer()
	peer := guard.RedisRate(peerClient, limitRate)
	keys := make([]string, 64)
	for i := range keys {
		keys[i] = fmt.Sprintf("tenant-%d", i)
	}
	// Warm up both (connections, script cache).
	guard.ClosedLoop(veer, 8, 200*time.Millisecond, keys)
	guard.ClosedLoop(peer, 8, 200*time.Millisecond, keys)

	type row struct{ closed, open guard.LoadResult }
	var vr, pr []row
	for range rounds {
		v := row{closed: guard.ClosedLoop(veer, 16, d, keys)}
		p := row{closed: guard.ClosedLoop(peer, 16, d, keys)}
		v.open = guard.OpenLoop(veer, orate, 64, d, keys)
		p.open = guard.OpenLoop(peer, orate, 64, d, keys)
		vr, pr = append(vr, v), append(pr, p)
	}
	stat := func(rs []row, f func(row) float64) (float64, float64, float64) {
		var xs []float64
		for _, r := range rs {
			xs = append(xs, f(r))
		}
		return median(xs), slices.Min(xs), slices.Max(xs)
	}
	fmt.Printf("## distributed limit decision through Redis (one instance, 64 keys, limit not reached)\n\n")
	fmt.Printf("| contender | closed loop decisions/s (16 workers) median [min..max] | open loop %d/s: p50 ms | p99 ms median [min..max] | errors |\n|---|---|---|---|---|\n", orate)
	for _, c := range []struct {
		name string
		rs   []row
	}{{"veer limitredis", vr}, {"redis_rate v10", pr}} {
		m, lo, hi := stat(c.rs, func(r row) float64 { return r.closed.PerSecond })
		p50, _, _ := stat(c.rs, func(r row) float64 { return r.open.P50.Seconds() * 1000 })
		p99, p99lo, p99hi := stat(c.rs, func(r row) float64 { return r.open.P99.Seconds() * 1000 })
		var errs int64
		for _, r := range c.rs {
			errs += r.closed.Errors + r.open.Errors
		}
		fmt.Printf("| %s | %.0f [%.0f..%.0f] | %.2f | %.2f [%.2f..%.2f] | %d |\n", c.name, m, lo, hi, p50, p99, p99lo, p99hi, errs)
	}
	var ratios []float64
	for i := range vr {
		ratios = append(ratios, vr[i].closed.PerSecond/pr[i].closed.PerSecond)
	}
	fmt.Printf("\nveer/redis_rate throughput ratio per round: median %.2f (min %.2f, max %.2f)\n\n", median(ratios), slices.Min(ratios), slices.Max(ratios))
	return nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
