package shed

import (
	"os"
	"runtime"
	"sync"
	"sync/atomic"
)

// pollYield gives up the processor until the Go runtime next polls the
// network, then lets the goroutines that poll woke run first.
//
// Why: while the processors are busy, the scheduler looks for newly readable
// connections only when its run queues are empty, or from its monitor thread
// at most every 10 ms (in practice every 10-20 ms once the monitor has backed
// off). Under a CPU-bound overload the run queue is never empty, so new
// requests sit unseen in the kernel for that long and then reach their stages
// in a burst, in arrival order. runtime.Gosched does not help: it puts the
// goroutine behind the others and the run queue stays non-empty. On one core
// under a 2× and a 6× overload, admitted requests spent a median of 10.6-13.2
// ms before the middleware ran with runtime.Gosched, 4.3-6.5 ms with
// pollYield (docs/shed.md).
//
// How: the caller reads an empty pipe that the runtime's network poller
// watches, so it parks until a poll finds the pipe readable; a helper
// goroutine, which runs only once the caller has parked (it is the next to run
// on this processor), writes the byte. With the caller parked, the run queue
// empties as the goroutines ahead run and block, and the scheduler polls
// before it would go idle: the poll wakes the caller and the new requests in
// one batch. The caller then yields once more, so that the new requests read
// and queue in their stages (by tier) before its handler takes the processor.
//
// Pipes are pooled (a fresh pipe per call costs 35 µs instead of 8 on the
// reference VM, BenchmarkPollYield); one is used by one call at a time, and
// nothing else outlives a call, so the yield is safe in a testing/synctest
// bubble and under goroutine-leak checks. A pipe the pool drops is closed by
// its files' finalizers. With several processors the helper may write before
// the caller parks; the yield is then as short as runtime.Gosched, which is
// also what it falls back to where pipes are not pollable (newWakePipe).
func pollYield() {
	for {
		n := pollers.Load()
		if n >= maxPollers {
			// Enough goroutines already wait for the next poll; it
			// will come as soon as they have parked.
			runtime.Gosched()
			return
		}
		if pollers.CompareAndSwap(n, n+1) {
			break
		}
	}
	defer pollers.Add(-1)
	p, _ := wakePipes.Get().(*wakePipe)
	if p == nil {
		r, w, err := newWakePipe()
		if err != nil {
			runtime.Gosched()
			return
		}
		p = &wakePipe{r: r, w: w}
	}
	go p.ring()
	var b [1]byte
	if _, err := p.r.Read(b[:]); err != nil {
		// The helper's write failed and it closed its end (EOF).
		p.r.Close()
		runtime.Gosched()
		return
	}
	wakePipes.Put(p)
	runtime.Gosched()
}

// maxPollers bounds the goroutines that wait for a poll at once, and so the
// pipes open for it (two descriptors each): one poll wakes them all, so more
// would cost descriptors and gain little. Beyond it, pollYield is
// runtime.Gosched. Under CPU-bound overload the limits that admit requests
// are small (one or two per processor), so the bound rarely applies.
const maxPollers = 16

var pollers atomic.Int32

// wakePipe is a pipe pollYield waits on.
type wakePipe struct{ r, w *os.File }

var wakePipes sync.Pool

// ring writes the byte that wakes the reader; on failure it closes the write
// end, so that the reader sees EOF instead of waiting forever.
func (p *wakePipe) ring() {
	if _, err := p.w.Write([]byte{0}); err != nil {
		p.w.Close()
	}
}
