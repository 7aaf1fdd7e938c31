// Command guardbench compares veer's flow-control packages with their peers
// in one run, alternating the contenders (A B A B …) over several rounds and
// printing the median, the spread and the ratio to the peer:
//
//	limit (local decision)      vs golang.org/x/time/rate
//	breaker (Allow + done)      vs sony/gobreaker/v2 TwoStepCircuitBreaker
//	limit/limitredis (shared)   vs go-redis/redis_rate/v10, on a redis-server it starts
//
// Usage: go run ./cmd/guardbench [-rounds 5] [-what local,breaker,redis] [-d 2s]
//
// For the Redis comparison the Makefile (make bench-guard) pins
// redis-server to CPU 0 (-redis-cpu 0) and runs this command under
// taskset -c 1, so that the server and the load generator (which holds the
// limiter instance and its client) have one core each.
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
	var ro redisOpts
	flag.IntVar(&ro.openRate, "rate", 20000, "open-loop decision rate per instance for the Redis comparison")
	flag.IntVar(&ro.workers, "workers", 32, "closed-loop workers for the Redis comparison")
	flag.IntVar(&ro.limit, "limit", 2000, "binding limit (decisions/s) of the Redis over-admission run; the run counts only if the offered load is at least 1.5 times it")
	flag.IntVar(&ro.burst, "burst", 2000, "burst of that limit (one second's worth: a stall of the generator shorter than that loses no tokens)")
	flag.StringVar(&ro.redisCPU, "redis-cpu", "", "pin redis-server to these CPUs (taskset -c list); run this command under taskset on the others")
	flag.Parse()
	ro.rounds, ro.d = *rounds, *dur
	fmt.Printf("# guardbench: GOMAXPROCS=%d, %d rounds, %s\n\n", runtime.GOMAXPROCS(0), *rounds, time.Now().UTC().Format(time.RFC3339))
	for _, w := range strings.Split(*what, ",") {
		switch w {
		case "local":
			micro("local limit decision (explicit time, 1 dimension) vs one unkeyed x/time/rate limiter", *rounds, guard.LimitVeer1Dim, guard.LimitXTimeRate)
			micro("local limit decision (explicit time, 1 dimension) vs x/time/rate per key (map under a RWMutex)", *rounds, guard.LimitVeer1Dim, guard.LimitXTimeRateKeyed)
		case "breaker":
			micro("breaker Allow + done (wall clock)", *rounds, guard.BreakerVeer, guard.BreakerGobreaker)
		case "redis":
			if err := redisCompare(ro); err != nil {
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

// redisOpts are the knobs of the distributed-limit comparison.
type redisOpts struct {
	rounds   int
	d        time.Duration
	openRate int    // open-loop decisions/s
	workers  int    // closed-loop workers
	limit    int    // the binding limit of the over-admission run, per s
	burst    int    // its burst
	redisCPU string // taskset -c list for redis-server, "" = not pinned
}

// sample is one contender's round.
type sample struct {
	closed           guard.LoadResult
	genCPU, redisCPU float64 // µs of CPU per decision in the closed loop
	open             guard.LoadResult
	over             guard.Admission
}

func redisCompare(o redisOpts) error {
	srv, err := guard.StartRedis(o.redisCPU)
	if err != nil {
		return err
	}
	defer srv.Stop()
	veerClient, peerClient := guard.Client(srv.Addr), guard.Client(srv.Addr)
	defer veerClient.Close()
	defer peerClient.Close()
	const high = 1000000 // throughput runs: the limit is not reached
	veer, closeVeer, err := guard.VeerRedis(veerClient, high, high)
	if err != nil {
		return err
	}
	defer closeVeer()
	veerOver, closeVeerOver, err := guard.VeerRedis(veerClient, o.limit, o.burst)
	if err != nil {
		return err
	}
	defer closeVeerOver()
	type contender struct {
		name      string
		dec, over guard.Decider
		rs        []sample
	}
	cs := []*contender{
		{name: "veer limitredis", dec: veer, over: veerOver},
		{name: "redis_rate v10", dec: guard.RedisRate(peerClient, high, high), over: guard.RedisRate(peerClient, o.limit, o.burst)},
	}
	keys := make([]string, 64)
	for i := range keys {
		keys[i] = fmt.Sprintf("tenant-%d", i)
	}
	for _, c := range cs { // warm up: connections, script cache
		guard.ClosedLoop(c.dec, o.workers, 300*time.Millisecond, keys)
	}
	for r := range o.rounds {
		for _, c := range cs { // A B A B …
			var s sample
			g0, r0 := guard.SelfCPU(), redisCPU(srv)
			s.closed = guard.ClosedLoop(c.dec, o.workers, o.d, keys)
			g1, r1 := guard.SelfCPU(), redisCPU(srv)
			s.genCPU = float64((g1 - g0).Microseconds()) / float64(s.closed.Decisions)
			s.redisCPU = float64((r1 - r0).Microseconds()) / float64(s.closed.Decisions)
			s.open = guard.OpenLoop(c.dec, o.openRate, 64, o.d, keys)
			s.over = guard.OverAdmission(c.over, o.workers, o.d, fmt.Sprintf("over-%d", r), o.limit, o.burst)
			c.rs = append(c.rs, s)
		}
	}
	stat := func(rs []sample, f func(sample) float64) (float64, float64, float64) {
		var xs []float64
		for _, r := range rs {
			xs = append(xs, f(r))
		}
		return median(xs), slices.Min(xs), slices.Max(xs)
	}
	fmt.Printf("## distributed limit decision through Redis (one limiter instance, one redis-server)\n\n")
	fmt.Printf("redis-server pinned to CPU %q, this process to the CPUs it was started on (GOMAXPROCS=%d); %d rounds, contenders alternating, %v per run.\n\n",
		o.redisCPU, runtime.GOMAXPROCS(0), o.rounds, o.d)
	fmt.Printf("| contender | closed loop decisions/s (%d workers, 64 keys) median [min..max] | closed p99 ms | client CPU µs/decision | Redis CPU µs/decision | open loop %d/s: achieved/s | p50 ms | p99 ms median [min..max] | over-admission at %d/s burst %d, median [min..max] (offered/s) | errors |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
		o.workers, o.openRate, o.limit, o.burst)
	for _, c := range cs {
		m, lo, hi := stat(c.rs, func(s sample) float64 { return s.closed.PerSecond })
		cp99, _, _ := stat(c.rs, func(s sample) float64 { return ms(s.closed.P99) })
		gc, _, _ := stat(c.rs, func(s sample) float64 { return s.genCPU })
		rc, _, _ := stat(c.rs, func(s sample) float64 { return s.redisCPU })
		p50, _, _ := stat(c.rs, func(s sample) float64 { return ms(s.open.P50) })
		p99, p99lo, p99hi := stat(c.rs, func(s sample) float64 { return ms(s.open.P99) })
		ov, ovlo, ovhi := stat(c.rs, func(s sample) float64 { return 100 * s.over.Over })
		ach, _, _ := stat(c.rs, func(s sample) float64 { return s.open.PerSecond })
		offered, offlo, _ := stat(c.rs, func(s sample) float64 { return float64(s.over.Decisions) / s.over.Elapsed.Seconds() })
		valid := ""
		if offlo < 1.5*float64(o.limit) {
			valid = " NOT BINDING in some rounds"
		}
		var errs int64
		for _, s := range c.rs {
			errs += s.closed.Errors + s.open.Errors
		}
		fmt.Printf("| %s | %.0f [%.0f..%.0f] | %.2f | %.1f | %.1f | %.0f | %.2f | %.2f [%.2f..%.2f] | %+.2f%% [%+.2f..%+.2f] (%.0f, min %.0f%s) | %d |\n",
			c.name, m, lo, hi, cp99, gc, rc, ach, p50, p99, p99lo, p99hi, ov, ovlo, ovhi, offered, offlo, valid, errs)
	}
	ratio := func(f func(sample) float64) (float64, float64, float64) {
		var xs []float64
		for i := range cs[0].rs {
			xs = append(xs, f(cs[0].rs[i])/f(cs[1].rs[i]))
		}
		return median(xs), slices.Min(xs), slices.Max(xs)
	}
	fmt.Println()
	for _, q := range []struct {
		what string
		f    func(sample) float64
	}{
		{"closed-loop decisions/s", func(s sample) float64 { return s.closed.PerSecond }},
		{"client CPU per decision", func(s sample) float64 { return s.genCPU }},
		{"Redis CPU per decision", func(s sample) float64 { return s.redisCPU }},
		{"open-loop p99", func(s sample) float64 { return ms(s.open.P99) }},
	} {
		m, lo, hi := ratio(q.f)
		fmt.Printf("- veer / redis_rate, %s, per round: median %.2f (min %.2f, max %.2f)\n", q.what, m, lo, hi)
	}
	v := cs[0].rs
	thr, _, _ := stat(v, func(s sample) float64 { return s.closed.PerSecond })
	p99, _, _ := stat(v, func(s sample) float64 { return ms(s.open.P99) })
	ach, _, _ := stat(v, func(s sample) float64 { return s.open.PerSecond })
	_, _, ov := stat(v, func(s sample) float64 { return 100 * s.over.Over })
	fmt.Printf("\nTargets for veer (medians; over-admission: the worst round): ≥ 20 000 decisions/s: %s (%.0f); p99 ≤ 2 ms at %d/s open loop: %s (%.2f ms, %.0f/s achieved); over-admission ≤ 1%%: %s (%+.2f%%)\n\n",
		metStr(thr >= 20000), thr, o.openRate, metStr(p99 <= 2 && ach >= 0.98*float64(o.openRate)), p99, ach, metStr(ov <= 1), ov)
	return nil
}

func ms(d time.Duration) float64 { return d.Seconds() * 1000 }

func metStr(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

func redisCPU(srv *guard.Redis) time.Duration {
	d, err := srv.CPU()
	if err != nil {
		fmt.Fprintln(os.Stderr, "guardbench: redis CPU:", err)
	}
	return d
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
