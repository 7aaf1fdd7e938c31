// Package guard compares veer's flow-control packages with their peers,
// side by side in one process: limit against golang.org/x/time/rate,
// breaker against sony/gobreaker/v2, limit/limitredis against
// go-redis/redis_rate/v10 on a local redis-server. The Go benchmarks in
// guard_test.go give ns/op and allocs; cmd/guardbench alternates the
// contenders over several rounds and prints ratios.
package guard

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/veerhq/veer/limit"
	"github.com/veerhq/veer/limit/limitredis"
)

// Redis is a redis-server started for a benchmark run.
type Redis struct {
	Addr string
	cmd  *exec.Cmd
	dir  string
}

// StartRedis starts redis-server on a free loopback port in a temp dir.
func StartRedis() (*Redis, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not found (install with `make deps`): %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir, err := os.MkdirTemp("", "guardbench-redis")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", "")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "Ready to accept connections") {
			go func() {
				for sc.Scan() {
				}
			}()
			return &Redis{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, dir: dir}, nil
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	return nil, errors.New("redis-server exited before it was ready")
}

// Stop kills the server and removes its directory.
func (r *Redis) Stop() {
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	os.RemoveAll(r.dir)
}

// Decider is one distributed-limit contender: one decision for key.
type Decider func(ctx context.Context, key string) (allowed bool, err error)

// Client returns a go-redis client for a contender.
func Client(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64, MaxRetries: 1, ContextTimeoutEnabled: true})
}

// VeerRedis returns veer's limitredis as a Decider with rate per second.
func VeerRedis(rdb *redis.Client, rate int) (Decider, func(), error) {
	l, err := limitredis.New(limitredis.Config{Timeout: time.Second, Limits: limit.Config{Dimensions: []limit.Dimension{
		{Name: "tenant", Default: limit.Limits{Rate: float64(rate), Burst: rate}},
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

// RedisRate returns go-redis/redis_rate as a Decider with rate per second.
func RedisRate(rdb *redis.Client, rate int) Decider {
	l := redis_rate.NewLimiter(rdb)
	lim := redis_rate.PerSecond(rate)
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
