// Package gcfloor gives a process's garbage collector a heap floor: while
// the live heap is small, the GC percent (GOGC) is raised so that the heap
// may grow to the floor before the next collection; once twice the live
// heap is over the floor, GOGC's own 100 applies.
//
// Why: the collector runs when the heap reaches twice the live heap
// (GOGC=100), and a proxy's live heap is a few MiB (its memory is the
// connections' buffers and the kernel's), so at GOGC=100 it collects after
// every few MiB of garbage: about every 800 proxied requests for veer's
// gateway, where the collection and its write barriers were a fifth of the
// gateway's own instructions per request. The cost of a floor is memory:
// a heap goal of about max(floor, 2 × live). The runtime's own minimum
// goal, which grows with the percent, is kept under the floor; the
// runtime adds the goroutine stacks and globals to the live heap, so the
// goal comes out a little over the floor (18-19 MiB at 16 MiB for the
// gateway).
//
// The GC percent is recomputed after every collection from the live heap
// it measured, so a heap that grows is bounded at the next collection, not
// a polling interval later. Nothing is changed when the operator set GOGC
// or GOMEMLIMIT in the environment.
package gcfloor

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// DefaultFloor is `veer gateway`'s floor unless --gc-heap-floor-mib says
// otherwise.
const DefaultFloor = 16 << 20

// runtimeHeapMinimum is the Go runtime's smallest heap goal at GOGC=100
// (defaultHeapMinimum); it scales with the GC percent, so a percent over
// floor × 100 / runtimeHeapMinimum would put the goal above the floor.
const runtimeHeapMinimum = 4 << 20

// Percent is the GC percent that puts the heap goal, live × (1 +
// percent/100), at floor: never below 100 (GOGC's default), and never so
// high that the runtime's own minimum goal, which grows with the percent,
// passes the floor (a tiny live heap). A live heap of 0 (no collection
// yet) gives 100.
func Percent(live, floor uint64) int {
	if live == 0 || floor <= 2*live {
		return 100
	}
	p := (floor - live) * 100 / live
	if most := floor * 100 / runtimeHeapMinimum; p > most {
		p = most
	}
	return int(max(p, 100))
}

// Start keeps the heap floor until stop is called; stop restores the GC
// percent found at the start. It returns why it changed nothing ("" when
// it runs): floor 0, or GOGC or GOMEMLIMIT set by the operator.
func Start(floor uint64) (stop func(), off string) {
	switch {
	case floor == 0:
		return func() {}, "floor 0"
	case os.Getenv("GOGC") != "":
		return func() {}, "GOGC is set"
	case os.Getenv("GOMEMLIMIT") != "":
		return func() {}, "GOMEMLIMIT is set"
	}
	t := &tuner{floor: floor, read: readLive, set: debug.SetGCPercent}
	t.run()
	return t.stop, ""
}

func (t *tuner) run() {
	t.prev = t.set(100)
	t.set(t.prev)
	t.adjust()
	t.arm()
}

// tuner sets the GC percent after each collection (a cleanup on an
// unreachable sentinel runs once the collection that found it ends, and
// arms the next).
type tuner struct {
	floor   uint64
	read    func() uint64 // the live heap after the last collection
	set     func(int) int // debug.SetGCPercent
	after   func(int)     // tests: called after each adjustment
	mu      sync.Mutex    // the fields below
	stopped bool
	cur     int // the percent set, 0 before the first
	prev    int
}

type sentinel struct {
	_ *byte // a pointer: not a tiny allocation, whose cleanup may never run
	_ uint64
}

func (t *tuner) arm() {
	runtime.AddCleanup(&sentinel{}, func(t *tuner) {
		if t.adjust() {
			t.arm()
		}
	}, t)
}

// adjust sets the percent the live heap calls for; false once stopped.
func (t *tuner) adjust() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return false
	}
	p := Percent(t.read(), t.floor)
	if p != t.cur {
		t.set(p)
		t.cur = p
	}
	if t.after != nil {
		t.after(p)
	}
	return true
}

func (t *tuner) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.stopped {
		t.stopped = true
		t.set(t.prev)
	}
}

var liveSample = []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
var liveMu sync.Mutex

func readLive() uint64 {
	liveMu.Lock()
	defer liveMu.Unlock()
	metrics.Read(liveSample)
	if liveSample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return liveSample[0].Value.Uint64()
}
