package shed

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSchedProbeSeesRunQueue runs real goroutines on one processor: while
// 20 of them spin, whenever the test goroutine runs the others wait in the
// run queue, and the probe must report that standing queue; once they stop,
// the next interval's minimum falls to at most a few.
func TestSchedProbeSeesRunQueue(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	p := newSchedProbe()
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			for !stop.Load() {
				for range 1000 { // work between checks; preemptible
				}
			}
		})
	}
	base := time.Unix(1000, 0)
	now := base
	p.runnable(now, 100*time.Millisecond) // opens the interval
	for range 6 {                         // 60 ms of fake time: the interval (≥ every/2) closes
		now = now.Add(schedEvery)
		p.observe(now)
		runtime.Gosched()
	}
	got := p.runnable(now, 100*time.Millisecond)
	stop.Store(true)
	wg.Wait()
	if got < 10 {
		t.Fatalf("runnable with 20 spinning goroutines on one processor = %d, want ≥ 10", got)
	}
	if w := p.preWait(now.Add(schedEvery), time.Hour, 5*time.Millisecond); w < 9*5*time.Millisecond {
		t.Fatalf("preWait = %v, want the last interval's queue × 5ms", w)
	}
	for range 12 {
		now = now.Add(schedEvery)
		p.observe(now)
	}
	if got := p.runnable(now, 100*time.Millisecond); got > 3 {
		t.Fatalf("runnable after the spinners stopped = %d, want ≤ 3", got)
	}
	// A clock from another world (a test's fake time far behind) starts
	// afresh instead of reusing what was measured on this one.
	if got := p.runnable(base.Add(-time.Hour), 100*time.Millisecond); got != 0 {
		t.Fatalf("runnable on a clock that went back = %d, want 0 (nothing measured yet)", got)
	}
}
