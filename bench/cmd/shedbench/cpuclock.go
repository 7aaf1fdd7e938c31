package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// The measured phase's CPU time at nanosecond resolution. /proc/<pid>/stat
// (procCPU) counts in clock ticks of 10 ms, and a process's whole-life
// rusage includes its start (runtime, contender set-up) and its end: the
// overhead target (1 % of a core = 10 ms of CPU a second) is of the order
// of both. The scheduler's own account, /proc/<pid>/task/<tid>/schedstat
// (first field: time on a CPU, in ns), summed over the process's threads,
// is exact for the threads alive at both readings; a Go server rarely
// ends a thread, and a thread that ends between the readings loses its
// time, so the figure errs low by at most that thread's run time.

// threadsCPU is the CPU time of every live thread of process pid, in ns,
// from schedstat; false where there is no schedstat (then procCPU).
func threadsCPU(pid int) (time.Duration, bool) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, false
	}
	var sum time.Duration
	for _, e := range ents {
		b, err := os.ReadFile(dir + "/" + e.Name() + "/schedstat")
		if err != nil {
			if os.IsNotExist(err) {
				continue // the thread ended since ReadDir
			}
			return 0, false
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			return 0, false
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, false
		}
		sum += time.Duration(ns)
	}
	return sum, true
}

// phaseCPU reads process pid's CPU time with threadsCPU, or procCPU where
// schedstat is missing.
func phaseCPU(pid int) (time.Duration, bool) {
	if d, ok := threadsCPU(pid); ok {
		return d, true
	}
	return procCPU(pid)
}

// measurePhaseCPU samples pid's CPU time (phaseCPU) at t0+from and t0+to
// (the measured phase) and returns a function that waits for both and gives
// the difference (false if it could not be read).
func measurePhaseCPU(pid int, t0 time.Time, from, to time.Duration) func() (time.Duration, bool) {
	ch := make(chan time.Duration, 1)
	go func() {
		time.Sleep(time.Until(t0.Add(from)))
		a, ok1 := phaseCPU(pid)
		time.Sleep(time.Until(t0.Add(to)))
		b, ok2 := phaseCPU(pid)
		if !ok1 || !ok2 {
			ch <- -1
			return
		}
		ch <- b - a
	}()
	return func() (time.Duration, bool) { d := <-ch; return d, d >= 0 }
}
