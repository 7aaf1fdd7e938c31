package main

import (
	"flag"
	"syscall"
	"time"
)

// Stalls: the server process stopped (SIGSTOP) for -stall every
// -stall-every during each run and continued (SIGCONT), as when another
// process or the machine takes its processor for a moment. A shedder must
// not over-react to such a moment: issue 18's over-shedding round at 1.25×
// (0.72 of capacity with 42.6% shed) had lost a fifth of its core, and the
// virtual-time model reproduced it with one 60-100 ms stall
// (TestModelStallAtMildOverload in shed). Off by default.
var (
	stall      = flag.Duration("stall", 0, "stop the server process this long every -stall-every during each run (0: never)")
	stallEvery = flag.Duration("stall-every", time.Second, "period of the -stall stalls, from the run's start")
)

// startStalls stops and continues process pid as -stall says until the
// returned function is called; the process is left running.
func startStalls(pid int) (stop func()) {
	if *stall <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(*stallEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			if syscall.Kill(pid, syscall.SIGSTOP) != nil {
				return
			}
			select {
			case <-done:
			case <-time.After(*stall):
			}
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}
