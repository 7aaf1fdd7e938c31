package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	bench "github.com/veerhq/veer/bench/shed"
	"github.com/veerhq/veer/shed"
)

// rejectCost is `shedbench rejectcost`: the server CPU time of one 503 on
// a real server (parsing, the middleware, the response and the system
// calls), for the veer contender of this binary and of others given with
// -bins (an older build, for an A/B), alternating. Each server first learns
// its 5 ms handler's service time from 300 sequential requests; then 32
// closed-loop workers send requests with a 1 ms budget (Veer-Timeout-Ms),
// which the stage refuses on arrival with reason deadline, for -dur. The
// figure is the server's CPU time over that phase (from /proc) per request
// answered; it does not depend on how much of its core the server got.
func rejectCost(args []string) error {
	fs := flag.NewFlagSet("rejectcost", flag.ExitOnError)
	bins := fs.String("bins", "", "comma-separated other shedbench binaries to compare (label=path)")
	contender := fs.String("contender", "veer", "contender of this binary")
	rounds := fs.Int("rounds", 3, "rounds")
	dur := fs.Duration("dur", 2*time.Second, "refusal phase")
	_ = fs.Parse(args)
	raiseNoFile()
	iters := bench.Calibrate(5 * time.Millisecond)
	type variant struct{ label, bin, contender string }
	vs := []variant{{"this", "", *contender}}
	for _, b := range strings.Split(*bins, ",") {
		if l, p, ok := strings.Cut(b, "="); ok {
			vs = append(vs, variant{l, p, "veer"})
		}
	}
	client := bench.NewClient(64)
	h := bench.HandlerConfig{Kind: "cpu", Iters: iters, Paths: []string{"GET /a"}}
	for round := range *rounds {
		for _, v := range vs {
			// SHEDBENCH_PHASEPROFILE: the whole server process (the 300
			// sequential requests are the profile's handler samples).
			setProfile("rejectcost", v.label, round, 0, time.Hour)
			s, err := startServerBin(v.bin, v.contender, h, "")
			if err != nil {
				return err
			}
			url := "http://" + s.addr + "/a"
			for range 300 {
				if resp, err := client.Get(url); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
			var n, refused atomic.Int64
			ctx, cancel := context.WithTimeout(context.Background(), *dur)
			cpu0, _ := procCPU(s.cmd.Process.Pid)
			var wg sync.WaitGroup
			for range 32 {
				wg.Go(func() {
					for ctx.Err() == nil {
						req, _ := http.NewRequest(http.MethodGet, url, nil)
						req.Header.Set(shed.TimeoutHeader, "1")
						resp, err := client.Do(req)
						if err != nil {
							continue
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						n.Add(1)
						if resp.StatusCode == http.StatusServiceUnavailable {
							refused.Add(1)
						}
					}
				})
			}
			wg.Wait()
			cancel()
			cpu1, _ := procCPU(s.cmd.Process.Pid)
			if _, _, _, err := s.stop(); err != nil {
				return err
			}
			fmt.Printf("%-6s round %d: %6d requests, %5.1f%% refused, %6.1f µs server CPU per request\n", v.label, round, n.Load(),
				100*float64(refused.Load())/float64(max(1, n.Load())), float64((cpu1-cpu0).Microseconds())/float64(max(1, n.Load())))
		}
	}
	return nil
}
