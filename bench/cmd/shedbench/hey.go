package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"flag"
	"fmt"
	"log"
	"math"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	bench "github.com/veerhq/veer/bench/shed"
)

// heyStorm is `shedbench hey`: the rejection storm of issue 18 as a new
// user would make it, with a client we did not write. For each contender
// (alternating order per round) it starts the server process (one core,
// GOMAXPROCS=1, the 5 ms cpu handler) and runs two hey processes at once
// for -z: the storm, `hey -c 128` without headers (default tier
// sheddable_plus; hey ignores Retry-After and retries at once), and the
// critical caller, `hey -c 2 -q R -H "Veer-Criticality: critical"` at
// -crit × capacity in all. It reports goodput (200s per second of both)
// over the capacity measured before the round, goodput per CPU second of
// the server over the capacity run's requests per CPU second (a figure a
// shared machine's varying CPU share moves much less), the server's CPU
// share, the storm's 503s per second, and critical success and p99.
func heyStorm(args []string) error {
	fs := flag.NewFlagSet("hey", flag.ExitOnError)
	conts := fs.String("contenders", "none,veer,veer-nohold", "comma-separated contenders")
	rounds := fs.Int("rounds", 1, "rounds; contenders alternate order each round")
	workers := fs.Int("c", bench.StormWorkers, "hey -c of the storm")
	dur := fs.Duration("z", 4*time.Second, "hey -z of both")
	crit := fs.Float64("crit", 0.1, "critical load, as a fraction of capacity")
	work := fs.Duration("work", 5*time.Millisecond, "CPU per request of the cpu handler")
	_ = fs.Parse(args)
	if _, err := exec.LookPath("hey"); err != nil {
		return fmt.Errorf("hey not found (apt-get install -y hey): %w", err)
	}
	raiseNoFile()
	iters := bench.Calibrate(*work)
	client := bench.NewClient(64)
	h := bench.HandlerConfig{Kind: "cpu", Iters: iters, Paths: []string{"GET /a"}}
	fmt.Printf("%-12s %5s %8s %8s %7s %9s %9s %8s %9s %9s\n", "contender", "round", "cap rps", "goodput", "per cpu", "cpu share", "storm 503/s", "crit ok", "crit p99", "storm p99")
	for round := range *rounds {
		order := strings.Split(*conts, ",")
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, name := range order {
			capRPS, perCPU, err := capacity(client, iters)
			if err != nil {
				return err
			}
			s, err := startServer(name, h, "")
			if err != nil {
				return err
			}
			url := "http://" + s.addr + "/a"
			perWorker := max(1, int(math.Round(*crit*capRPS/2)))
			z := fmt.Sprintf("%ds", int(dur.Seconds()))
			var wg sync.WaitGroup
			var stormOut, critOut []byte
			var stormErr, critErr error
			cpu0, _ := procCPU(s.cmd.Process.Pid)
			t0 := time.Now()
			wg.Go(func() {
				stormOut, stormErr = exec.CommandContext(context.Background(), "hey", "-z", z, "-c", strconv.Itoa(*workers), "-o", "csv", url).Output()
			})
			wg.Go(func() {
				critOut, critErr = exec.CommandContext(context.Background(), "hey", "-z", z, "-c", "2", "-q", strconv.Itoa(perWorker),
					"-o", "csv", "-H", "Veer-Criticality: critical", url).Output()
			})
			wg.Wait()
			wall := time.Since(t0)
			cpu1, _ := procCPU(s.cmd.Process.Pid)
			if _, _, _, err := s.stop(); err != nil {
				return err
			}
			if stormErr != nil || critErr != nil {
				return fmt.Errorf("hey: %v %v", stormErr, critErr)
			}
			st, cr := parseHey(stormOut), parseHey(critOut)
			good := float64(st.ok+cr.ok) / wall.Seconds()
			cpu := (cpu1 - cpu0).Seconds()
			gpc := 0.0
			if cpu > 0 && perCPU > 0 {
				gpc = float64(st.ok+cr.ok) / cpu / perCPU
			}
			fmt.Printf("%-12s %5d %8.0f %8.2f %7.2f %9.2f %11.0f %7.1f%% %8.1fms %8.1fms\n", name, round, capRPS, good/capRPS, gpc, cpu/wall.Seconds(),
				float64(st.n503)/wall.Seconds(), 100*float64(cr.ok)/float64(max(1, cr.n)), cr.p99ok, st.p99ok)
			log.Printf("hey %s round %d: storm %d requests (%d ok, %d 503, %d other), critical %d (%d ok)", name, round, st.n, st.ok, st.n503, st.n-st.ok-st.n503, cr.n, cr.ok)
		}
	}
	return nil
}

type heyResult struct {
	n, ok, n503 int
	p99ok       float64 // ms, of 200s
}

// parseHey reads hey's -o csv: response-time (s), ..., status-code, offset.
func parseHey(out []byte) heyResult {
	var r heyResult
	recs, err := csv.NewReader(bytes.NewReader(out)).ReadAll()
	if err != nil || len(recs) < 1 {
		return r
	}
	col := slices.Index(recs[0], "status-code")
	if col < 0 {
		return r
	}
	var lat []time.Duration
	for _, rec := range recs[1:] {
		if len(rec) <= col {
			continue
		}
		r.n++
		switch rec[col] {
		case "200":
			r.ok++
			if v, err := strconv.ParseFloat(rec[0], 64); err == nil {
				lat = append(lat, time.Duration(v*float64(time.Second)))
			}
		case "503":
			r.n503++
		}
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		r.p99ok = float64(lat[max(0, int(math.Ceil(0.99*float64(len(lat))))-1)]) / 1e6
	}
	return r
}
