package runq

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSchedProbeSeesRunQueue runs real goroutines on one processor: while
// 20 of them spin, whenever the test goroutine runs the others wait in the
// run queue, and the probe must report a backlog; once they stop, the
// backlog clears after BacklogHold. CPU time comes from a fake meter so that
// saturation does not depend on what else the machine runs.
func TestSchedProbeSeesRunQueue(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	p := NewProbe()
	var cpu time.Duration // the fake meter: the process CPU time
	p.cpu = func() (time.Duration, bool) { return cpu, true }
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			for !stop.Load() {
				for range 1000 { // a little work, then back to the run queue
				}
				runtime.Gosched()
			}
		})
	}
	now := time.Unix(1000, 0)
	step := func(use float64) {
		now = now.Add(schedEvery)
		cpu += time.Duration(use * float64(schedEvery))
		p.Observe(now)
		runtime.Gosched()
	}
	for range 12 { // 120 ms at full CPU
		step(1)
	}
	if !p.Busy() || !p.Saturated() {
		t.Fatalf("20 spinning goroutines on one processor at 100%% CPU: busy %v saturated %v, want both", p.Busy(), p.Saturated())
	}
	for range 12 { // the same backlog, but the process got only half a CPU
		step(0.5)
	}
	if !p.Busy() || p.Saturated() {
		t.Fatalf("backlog at 50%% CPU: busy %v saturated %v, want busy only", p.Busy(), p.Saturated())
	}
	stop.Store(true)
	wg.Wait()
	for range 12 {
		step(1)
	}
	if p.Busy() || p.Saturated() {
		t.Fatalf("after the spinners stopped: busy %v saturated %v, want neither", p.Busy(), p.Saturated())
	}
	// A clock from another world (a test's fake time far behind) samples
	// at once instead of never.
	if !p.due(now.Add(-time.Hour)) {
		t.Fatal("a clock that went back is never due")
	}
}
