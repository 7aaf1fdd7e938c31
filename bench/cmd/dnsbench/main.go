// Command dnsbench measures `veer dns` against NSD (and Knot DNS) with
// dnsperf on the same generated zone and query mix, in one run: every
// server is started once on loopback in a temp dir, then each round runs
// dnsperf against each server in turn, the order rotated every round, and
// the report gives per-round figures, medians and the ratios to NSD.
//
// Server CPU per query comes from /proc (user+system time of the server
// and its children during the run), so it holds on a loaded machine better
// than queries per second. With -pin (default when taskset exists) every
// server runs on CPU 1 and dnsperf on CPU 0.
//
// Usage: go run ./cmd/dnsbench -veer ../bin/veer [-base old-veer] [-rounds 3] [-d 10s] [-knot]
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	bdns "github.com/veerhq/veer/bench/dns"
)

func main() {
	veer := flag.String("veer", "bin/veer", "the veer binary")
	base := flag.String("base", "", "a second veer binary (e.g. built before a change), measured in the same rounds as veer-base")
	rounds := flag.Int("rounds", 3, "rounds (each runs every server once)")
	dur := flag.Duration("d", 10*time.Second, "dnsperf duration per run")
	names := flag.Int("names", 1000, "hosts in the zone")
	outstanding := flag.Int("q", 100, "dnsperf queries in flight (-q)")
	clients := flag.Int("c", 1, "dnsperf sockets (-c)")
	procs := flag.Int("procs", 1, "server threads: GOMAXPROCS of veer, NSD server-count, Knot udp-workers")
	knot := flag.Bool("knot", true, "also measure Knot DNS")
	_, tserr := exec.LookPath("taskset")
	pin := flag.Bool("pin", tserr == nil && runtime.NumCPU() >= 2, "pin servers to CPU 1 and dnsperf to CPU 0 (taskset)")
	fifo := flag.Bool("fifo", false, "run the servers and dnsperf at real-time priority (chrt -f 10, needs root) so that other jobs on a shared machine do not decide the figures; it takes both CPUs from them for the run (the kernel leaves them 5 %)")
	flag.Parse()
	if *fifo {
		rtPrefix = bdns.Prefix{"chrt", "-f", "10"}
	}
	if err := run(*veer, *base, *rounds, *dur, *names, *outstanding, *clients, *procs, *knot, *pin); err != nil {
		fmt.Fprintln(os.Stderr, "dnsbench:", err)
		os.Exit(1)
	}
}

// rtPrefix runs a process at real-time priority (-fifo).
var rtPrefix bdns.Prefix

func run(veer, base string, rounds int, dur time.Duration, names, outstanding, clients, procs int, knot, pin bool) error {
	dir, err := os.MkdirTemp("", "dnsbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srvPrefix, loadPrefix := rtPrefix, rtPrefix
	if pin {
		srvPrefix = append(slices.Clone(rtPrefix), "taskset", "-c", "1")
		loadPrefix = append(slices.Clone(rtPrefix), "taskset", "-c", "0")
	}
	z := bdns.Zone{Names: names}
	qf := filepath.Join(dir, "queries.txt")
	if err := os.WriteFile(qf, []byte(z.Queries(20000, 1)), 0o644); err != nil {
		return err
	}
	var servers []*bdns.Server
	defer func() {
		for _, s := range servers {
			s.Stop()
		}
	}()
	v, err := bdns.StartVeer(veer, dir, z, procs, srvPrefix)
	if err != nil {
		return err
	}
	servers = append(servers, v)
	if base != "" {
		bd := filepath.Join(dir, "base")
		if err := os.MkdirAll(bd, 0o755); err != nil {
			return err
		}
		b, err := bdns.StartVeer(base, bd, z, procs, srvPrefix)
		if err != nil {
			return err
		}
		b.Name = "veer-base"
		servers = append(servers, b)
	}
	n, err := bdns.StartNSD(dir, z, procs, srvPrefix)
	if err != nil {
		return err
	}
	servers = append(servers, n)
	if knot {
		k, err := bdns.StartKnot(dir, z, procs, srvPrefix)
		if err != nil {
			return err
		}
		servers = append(servers, k)
	}
	load := bdns.Load{Queries: qf, Duration: dur, Outstanding: outstanding, Clients: clients, Prefix: loadPrefix}
	fmt.Printf("# dnsbench %s\n\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Printf("Machine: %d CPUs, shared with other jobs (other helpers compiling and testing): compare the ratios of one run, not absolute figures across runs.\n", runtime.NumCPU())
	fmt.Printf("Zone: %d hosts (A each, AAAA every 4th, TXT every 10th); query mix 80%% A, 10%% AAAA (half NODATA), 5%% TXT, 5%% NXDOMAIN.\n", names)
	fmt.Printf("Load: dnsperf -q %d -c %d -l %s per run; servers with %d thread(s)/worker(s); pinned: %v; real-time priority: %v; order rotated each round.\n\n", outstanding, clients, dur, procs, pin, len(rtPrefix) > 0)
	var all [][]bdns.Result
	for r := range rounds {
		var rs []bdns.Result
		for i := range servers {
			s := servers[(i+r)%len(servers)]
			res, err := load.Run(s)
			if err != nil {
				return fmt.Errorf("%s: %w", s.Name, err)
			}
			fmt.Fprintf(os.Stderr, "round %d %s: %.0f q/s, %d lost, %.2f µs CPU/query\n", r+1, s.Name, res.QPS, res.Lost, float64(res.CPUPerQuery())/1e3)
			rs = append(rs, res)
		}
		all = append(all, rs)
	}
	bdns.Report(os.Stdout, all, "nsd")
	return nil
}
