package main

import (
	"fmt"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"time"
)

// CPU profiles of the server's measured phase. SHEDBENCH_PHASEPROFILE=dir
// makes every server process of a bench run write a pprof CPU profile of
// the measured phase (the phase the verdicts read) to
// dir/<scenario>-<contender>-<round>.pprof:
//
//	SHEDBENCH_PHASEPROFILE=/tmp/prof taskset -c 1 shedbench -rounds 1 -scenarios 7 -contenders veer
//	go tool pprof -top -nodecount 40 bin/shedbench /tmp/prof/7-storm-veer-0.pprof
//
// SHEDBENCH_PHASETRACE=dir writes a runtime execution trace of the same
// window instead, to dir/<scenario>-<contender>-<round>.trace (which
// goroutine ran when, and which network poll woke it: what a profile
// cannot show of a request that waited unseen):
//
//	SHEDBENCH_PHASETRACE=/tmp/tr taskset -c 1 shedbench -rounds 1 -scenarios 3 -contenders veer
//	go tool trace /tmp/tr/3-isolation-veer-0.trace
//
// The window is counted from the server's "ADDR" line, which the load
// starts right after (a few ms early at most). The profiler's own cost
// (100 samples a second) is in the profiled run's figures.

// profileWindow is the measured phase of the scenario being run, and
// profileName the file the next server writes its profile to ("" when
// SHEDBENCH_PHASEPROFILE is unset).
var (
	profileFrom, profileTo time.Duration
	profileName            string
)

// setProfile names the profile of the next server started, for the
// measured phase [from, to) of the run.
func setProfile(scenario, contender string, round int, from, to time.Duration) {
	dir, ext := os.Getenv("SHEDBENCH_PHASEPROFILE"), "pprof"
	if d := os.Getenv("SHEDBENCH_PHASETRACE"); d != "" {
		dir, ext = d, "trace"
	}
	if dir == "" {
		profileName = ""
		return
	}
	profileName = fmt.Sprintf("%s/%s-%s-%d.%s", dir, scenario, contender, round, ext)
	profileFrom, profileTo = from, to
}

// profileArgs are the serve flags that make the server profile itself.
func profileArgs() []string {
	if profileName == "" {
		return nil
	}
	return []string{"-cpuprofile", profileName, "-profile-from", profileFrom.String(), "-profile-to", profileTo.String()}
}

// profileServer profiles this process from `from` to `to` after now into
// path (an execution trace if path ends in .trace, else a CPU profile),
// and returns a function that ends the profile early (at exit).
func profileServer(path string, from, to time.Duration) (stop func(), err error) {
	start, end := pprof.StartCPUProfile, pprof.StopCPUProfile
	if strings.HasSuffix(path, ".trace") {
		start, end = trace.Start, trace.Stop
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer f.Close()
		select {
		case <-time.After(from):
		case <-quit:
			return
		}
		if err := start(f); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
			return
		}
		defer end()
		select {
		case <-time.After(to - from):
		case <-quit:
		}
	}()
	return func() { close(quit); <-done }, nil
}
