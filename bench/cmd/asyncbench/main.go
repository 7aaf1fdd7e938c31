// Command asyncbench measures durable async submissions: how many a second
// are acknowledged, and the p99 time to the acknowledgement, side by side
// in one run, alternating the contenders (A B C D A B C D …) over rounds:
//
//	embedded   asyncnats' in-process nats-server, every write synced (what a 202 waits for)
//	batch      the same with batch: true (the default): concurrent submissions of any tenants packed
//	           into one write, then distributed to their tenants' queues (the last column: how long
//	           after the round's last acknowledgement that was done)
//	external   a nats-server -js process on loopback (Debian's 2.9, whose store
//	           syncs on an interval: NOT durable per write; shown for its cost)
//	fsync      the floor: append the 1 KiB record to a file and fsync, per submission
//	group      the same file with group commit: concurrent submissions share one fsync
//
// Load is closed-loop: -c submitters each send their next submission when
// the previous one is acknowledged, -n submissions per round and contender.
// The fsync cost of the disk is measured first (1 KiB synced writes, like
// dd bs=1k oflag=dsync).
//
// Usage: go run ./cmd/asyncbench [-rounds 5] [-n 5000] [-c 64] [-size 1024] [-tenants 8]
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/veerhq/veer/async"
	"github.com/veerhq/veer/async/asyncnats"
)

type result struct {
	perSec float64
	p99    time.Duration
}

// contender submits one record and returns once it is acknowledged.
type contender struct {
	name   string
	open   func(dir string) (submit func(i int) error, close func(), err error)
	rounds []result
	// lags: for an engine, how long after a round's last acknowledgement
	// its last packed submission was in its tenant's queue (distributed)
	lags []time.Duration
}

func main() {
	rounds := flag.Int("rounds", 5, "rounds (contenders alternate within each)")
	n := flag.Int("n", 5000, "submissions per contender per round")
	c := flag.Int("c", 64, "concurrent submitters")
	size := flag.Int("size", 1024, "body bytes per submission")
	tenants := flag.Int("tenants", 8, "tenants the submissions are spread over")
	only := flag.String("only", "", "run only the contenders whose name contains this")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		must(err)
		must(pprof.StartCPUProfile(f))
		defer pprof.StopCPUProfile()
	}
	body := make([]byte, *size)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	root, err := os.MkdirTemp("", "asyncbench")
	must(err)
	defer os.RemoveAll(root)

	fc := fsyncCost(root, *size)
	fmt.Printf("fsync cost: %s per O_SYNC %d B write (%.0f/s; dd bs=%d oflag=dsync), in %s\n\n", fc, *size, float64(time.Second)/float64(fc), *size, os.TempDir())
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	var lagOf *contender // the contender whose round runs (set before each)
	mkEngine := func(cfg async.Config, every ...time.Duration) func(dir string) (func(int) error, func(), error) {
		return func(dir string) (func(int) error, func(), error) {
			if cfg.Engine == "" {
				cfg.Dir = dir
			}
			cfg.SubmitTimeout = time.Minute // measure how long the ack takes, not whether it beats 5 s
			e, err := asyncnats.Open(cfg, asyncnats.Options{Logger: quiet, DistributeEvery: append(every, 0)[0]})
			if err != nil {
				return nil, nil, err
			}
			submit := func(i int) error {
				inv := &async.Invocation{Tenant: fmt.Sprintf("t%d", i%*tenants), Group: async.DefaultGroup, Method: "POST", Host: "h", Path: "/job", Body: body, Submitted: time.Now()}
				_, _, err := e.Enqueue(context.Background(), inv)
				return err
			}
			return submit, func() {
				// the round ended with its last ack: wait until distribution
				// (packed submissions moved to their tenants' queues) is done
				t := time.Now()
				for {
					n, err := e.Undistributed(context.Background())
					if err != nil || n == 0 {
						break
					}
					time.Sleep(time.Millisecond)
				}
				lagOf.lags = append(lagOf.lags, time.Since(t))
				_ = e.Close()
			}, nil
		}
	}
	var ext *exec.Cmd
	extURL := ""
	if path, err := exec.LookPath("nats-server"); err == nil {
		ext, extURL = startNATS(path, filepath.Join(root, "external"))
		defer func() { _ = ext.Process.Kill(); _ = ext.Wait() }()
	} else {
		fmt.Println("nats-server not found (scripts/test-deps.sh): no external contender")
	}
	cs := []*contender{
		{name: "embedded, batch: false (sync always, a message per submission)", open: mkEngine(async.Config{Batch: new(false)})},
		{name: "embedded, batch: true (default: sync always, packed across tenants)", open: mkEngine(async.Config{})},
		{name: "embedded, batch: true, distributor without its 5 ms pause between rounds", open: mkEngine(async.Config{}, -1)},
		{name: "fsync per submission", open: fileFsync(body)},
		{name: "group commit", open: fileGroup(body)},
	}
	if extURL != "" {
		cs = append(cs, &contender{name: "external nats-server 2.9 (interval sync, NOT durable per write), batch default", open: mkEngine(async.Config{Engine: "external", URLs: []string{extURL}})})
	}
	cs = slices.DeleteFunc(cs, func(c *contender) bool { return !strings.Contains(c.name, *only) })
	for r := range *rounds {
		for _, ct := range cs {
			dir := filepath.Join(root, fmt.Sprintf("%d-%d", r, slices.Index(cs, ct)))
			must(os.MkdirAll(dir, 0o755))
			lagOf = ct
			submit, closeFn, err := ct.open(dir)
			must(err)
			ct.rounds = append(ct.rounds, load(submit, *n, *c))
			closeFn()
		}
	}
	fmt.Printf("%d rounds × %d submissions of %d B over %d tenants, %d concurrent submitters, closed loop; median [min, max]\n\n", *rounds, *n, *size, *tenants, *c)
	fmt.Println("| contender | acknowledged submissions/s | p99 to acknowledgement | all distributed, after the last ack |")
	fmt.Println("|---|---|---|---|")
	for _, ct := range cs {
		rates := make([]float64, 0, len(ct.rounds))
		p99s := make([]time.Duration, 0, len(ct.rounds))
		for _, r := range ct.rounds {
			rates = append(rates, r.perSec)
			p99s = append(p99s, r.p99)
		}
		slices.Sort(rates)
		slices.Sort(p99s)
		lag := "-"
		if len(ct.lags) > 0 {
			slices.Sort(ct.lags)
			lag = fmt.Sprintf("%s [%s, %s]", ct.lags[len(ct.lags)/2].Round(10*time.Microsecond), ct.lags[0].Round(10*time.Microsecond), ct.lags[len(ct.lags)-1].Round(10*time.Microsecond))
		}
		fmt.Printf("| %s | %.0f [%.0f, %.0f] | %s [%s, %s] | %s |\n", ct.name, rates[len(rates)/2], rates[0], rates[len(rates)-1],
			p99s[len(p99s)/2].Round(10*time.Microsecond), p99s[0].Round(10*time.Microsecond), p99s[len(p99s)-1].Round(10*time.Microsecond), lag)
	}
}

// load runs n submissions from c submitters.
func load(submit func(int) error, n, c int) result {
	var next atomic.Int64
	lat := make([]time.Duration, n)
	var wg sync.WaitGroup
	start := time.Now()
	for range c {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t := time.Now()
				if err := submit(i); err != nil {
					fmt.Fprintln(os.Stderr, "submit:", err)
					os.Exit(1)
				}
				lat[i] = time.Since(t)
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	slices.Sort(lat)
	return result{perSec: float64(n) / el.Seconds(), p99: lat[n*99/100]}
}

// fsyncCost is the median time of a synced write of size bytes.
func fsyncCost(dir string, size int) time.Duration {
	f, err := os.OpenFile(filepath.Join(dir, "dd"), os.O_CREATE|os.O_WRONLY|os.O_SYNC, 0o644)
	must(err)
	defer f.Close()
	b := make([]byte, size)
	var ds []time.Duration
	for range 500 {
		t := time.Now()
		_, err := f.Write(b)
		must(err)
		ds = append(ds, time.Since(t))
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

func fileFsync(body []byte) func(string) (func(int) error, func(), error) {
	return func(dir string) (func(int) error, func(), error) {
		f, err := os.Create(filepath.Join(dir, "log"))
		if err != nil {
			return nil, nil, err
		}
		var mu sync.Mutex
		return func(int) error {
			mu.Lock()
			defer mu.Unlock()
			if _, err := f.Write(body); err != nil {
				return err
			}
			return f.Sync()
		}, func() { _ = f.Close() }, nil
	}
}

// fileGroup: each submission appends under the lock and waits for the next
// fsync, which one flusher runs as soon as the previous one ends, for all
// records appended meanwhile.
func fileGroup(body []byte) func(string) (func(int) error, func(), error) {
	return func(dir string) (func(int) error, func(), error) {
		f, err := os.Create(filepath.Join(dir, "log"))
		if err != nil {
			return nil, nil, err
		}
		w := bufio.NewWriterSize(f, 1<<20)
		var mu sync.Mutex
		cond := sync.NewCond(&mu)
		var appended, synced uint64
		var flushing bool
		var ferr error
		return func(int) error {
			mu.Lock()
			defer mu.Unlock()
			if _, err := w.Write(body); err != nil {
				return err
			}
			appended++
			my := appended
			for synced < my {
				if !flushing {
					flushing = true
					upto := appended
					err := w.Flush()
					mu.Unlock()
					if err == nil {
						err = f.Sync()
					}
					mu.Lock()
					flushing, ferr = false, err
					synced = upto
					cond.Broadcast()
					continue
				}
				cond.Wait()
			}
			return ferr
		}, func() { _ = f.Close() }, nil
	}
}

var listening = regexp.MustCompile(`Listening for client connections on 127\.0\.0\.1:(\d+)`)

func startNATS(bin, dir string) (*exec.Cmd, string) {
	cmd := exec.Command(bin, "-js", "-sd", dir, "-a", "127.0.0.1", "-p", "-1")
	out, err := cmd.StderrPipe()
	must(err)
	must(cmd.Start())
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if m := listening.FindStringSubmatch(sc.Text()); m != nil {
			go func() {
				for sc.Scan() {
				}
			}()
			return cmd, "nats://127.0.0.1:" + m[1]
		}
	}
	fmt.Fprintln(os.Stderr, "nats-server did not start")
	os.Exit(1)
	return nil, ""
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
