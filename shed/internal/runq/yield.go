package runq

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Yield gives up the processor until the Go runtime next polls the
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
// Yield (docs/shed.md).
//
// How: one poll serves every goroutine that yields before it. The first
// (the leader) makes a descriptor that the runtime's network poller watches
// readable (one write to an eventfd on Linux, to a pipe elsewhere) and parks
// until the poller reports it (waitPoll). The event is edge-triggered and
// nothing on this processor polls before the leader has parked, so the leader
// parks; the run queue empties as the goroutines ahead run and block, and the
// scheduler polls before it would go idle: the poll wakes the leader and the
// new requests in one batch. Goroutines that yield while the leader waits
// (joiners) wait for the same poll on a mutex the leader holds until then,
// at the cost of a park and a wake-up, no system call. Every yielder then
// yields once more (runtime.Gosched), so that the new requests read and
// queue in their stages (by tier) before its handler takes the processor.
// That is most often, not always: the poll leaves the goroutines it woke in
// the processor's local run queue and Gosched puts the yielder in the
// global one, which the scheduler serves first on every 61st scheduling
// round. Where it matters (a critical request of another endpoint found by
// the same poll), the start turn waits for a second poll (turn.go).
//
// A first version gave every yielder a pipe of its own (pooled, at most 16
// at once) and a helper goroutine that wrote the byte once the caller had
// parked: three system calls, a goroutine and a pipe per yield; the
// descriptors all became readable in the same poll, so sharing one changes
// what the yield waits for in nothing (docs/shed.md, "fourth pass:
// shedyield").
//
// Nothing outlives a call (the descriptor is the process's, opened once), so
// the yield is safe in a testing/synctest bubble and under goroutine-leak
// checks. With several processors another may poll before the leader parks;
// the yield is then as short as runtime.Gosched, which is also what it falls
// back to where no descriptor can be polled (newWaker) or a write fails.
func Yield() {
	yieldMu.Lock()
	if yieldPending {
		yieldMu.Unlock()
		// Join: the leader holds yieldWait until its poll has woken it.
		yieldWait.Lock()
		yieldJoins.Add(1)
		yieldWait.Unlock()
		runtime.Gosched()
		return
	}
	yieldPending = true
	yieldWait.Lock()
	yieldMu.Unlock()
	if waitPoll() {
		yieldPolls.Add(1)
	} else {
		yieldFallbacks.Add(1)
	}
	yieldMu.Lock()
	yieldPending = false
	yieldMu.Unlock()
	yieldWait.Unlock()
	runtime.Gosched()
}

// The shared wait: yieldPending is set while a leader waits for a poll, and
// the leader holds yieldWait for that time; a joiner waits by locking it. A
// mutex, not a sync.Cond or a channel: yielders of every testing/synctest
// bubble and of none share the wait, and a goroutine blocked on a mutex is
// not durably blocked for synctest (a Cond's waiter is: its bubble would
// advance its clock, or report a deadlock, while the poll is still to come),
// while a Cond's Broadcast from outside a bubble to a waiter inside it kills
// the process, and a channel made inside a bubble may not be used outside it
// (TestPollYieldAcrossSynctestBubbles). A joiner that locks yieldWait after
// a later leader took it waits for that leader's poll instead: one more
// poll, never a missed one.
var (
	yieldMu      sync.Mutex
	yieldWait    sync.Mutex
	yieldPending bool
)

// yieldPolls counts the yields that waited for a network poll (leaders
// whose descriptor the poller reported), yieldJoins those that shared
// another's, yieldFallbacks those that fell back to runtime.Gosched
// (exported by collector).
var yieldPolls, yieldJoins, yieldFallbacks atomic.Uint64
