package runq

import (
	"sync/atomic"
	"time"
)

// The start turn: while the processors are saturated (the run queue is
// busy and the process used at least 90% of GOMAXPROCS: probe.go), a
// request of a sheddable tier starts its handler only if fewer than GOMAXPROCS other sheddable
// handlers started while it waited for its poll (Yield); otherwise it
// yields again. So the runtime polls the network between two sheddable
// handlers on a processor.
//
// Why (issue 18, isolation): every admitted request of a sheddable tier
// yields before its handler while the run queue is busy, and all the
// requests that yielded come back from the same poll (or from the monitor
// thread's poll while a handler runs). On one processor their handlers
// then ran one after the other, and the runtime polled the network again
// only once they had all run: a critical request of another endpoint that
// arrived meanwhile waited, unseen in the kernel, for every one of them
// (up to the limiter's limit: 4 at first, 2 once probed, 5 ms each on the
// bench), where issue 18's target allows one neighbour handler. With the
// turn, the second of them yields again, the poll that follows finds the
// critical request, and the critical request (which does not yield on an
// endpoint without contention) runs before it.
//
// On one processor a request that checks its turn runs while no CPU-bound
// handler does (the processor is its own), so "no sheddable handler started
// during my yield" means a poll came after the last one ended.
//
// Cost: one more yield (a park, a wake-up, a network poll: a few µs) per
// sheddable handler, and two more per turn it lost, only while saturated;
// at most turnYields more rounds, then the handler starts whatever the others did
// (progress never depends on winning a race). Only while saturated: a
// handler that waits for a dependency holds no processor, and counting
// its start against GOMAXPROCS would let one such request start per poll
// (the bench's scenario 5, a dependency of 20 slots, needs a thousand a
// second).
//
// Turns is one line of start turns. The line is process-wide, like the
// processors it shares out (ProcessTurns): two Shedders in one process (two
// servers, or a gateway and an embedded service) take their turns from the
// same line. The zero Turns is an empty line; tests make their own.
type Turns struct {
	starts  atomic.Uint64 // sheddable handlers started by Wait
	tickets atomic.Uint64 // the next request's place in line
	serving atomic.Uint64 // the lowest place whose turn may not have come
	// neverShedAt is the unix ns of the last never-shed request admitted
	// while the run queue was busy (NoteNeverShed).
	neverShedAt atomic.Int64
}

var processTurns Turns

// ProcessTurns returns the process-wide line.
func ProcessTurns() *Turns { return &processTurns }

// turnYields bounds the extra rounds of yields of one request.
const turnYields = 16

// The turn is for someone: only while a request of a never-shed tier was
// admitted under a busy run queue within turnMemory, anywhere in the
// process. Without such requests nobody waits to be seen between two
// sheddable handlers, and the turn's extra polls are pure cost (a proxy
// whose traffic has no critical tier: veer's gateway under hey read
// 1.06-1.07 times the CPU per request with the turn on every saturated
// request, scripts/gateway-cpu-ab.sh, issue 18's fifth pass).
const turnMemory = time.Second

// NoteNeverShed records a never-shed request admitted at now under a busy
// run queue. It stores at most once a millisecond, so a stream of critical
// requests does not contend on one cache line.
func (l *Turns) NoteNeverShed(now time.Time) {
	ns := now.UnixNano()
	if last := l.neverShedAt.Load(); ns-last >= int64(time.Millisecond) || ns < last {
		l.neverShedAt.Store(ns)
	}
}

// Wanted reports whether a never-shed request was noted within
// turnMemory of now.
func (l *Turns) Wanted(now time.Time) bool {
	last := l.neverShedAt.Load()
	d := now.UnixNano() - last
	return last != 0 && d >= 0 && d < int64(turnMemory)
}

// Wait yields until fewer than procs (GOMAXPROCS) sheddable handlers started
// during its last round of yields and its place in line has come (turns go
// in the order requests asked for them: whoever runs first after a poll
// would otherwise win, and a request could lose turnYields times over), at
// most turnYields+1 rounds. It counts its own start in the same step as the
// check (two requests back from one poll cannot both see the other not
// started yet).
//
// A round is two yields (yield, then settle; a nil settle is yield again):
// the first waits for a poll, the second for the goroutines that poll woke
// to have run. One is not enough: the
// poll puts the goroutines it woke in the processor's local run queue, and
// the yielder's runtime.Gosched puts it in the global one, which the
// scheduler serves first on every 61st scheduling round so that it is not
// starved. With a dozen refused requests coming back from a poll (each
// writes, spawns net/http's background read and blocks: 4-5 rounds each)
// the yielder was taken from the global queue, and started its handler,
// before a critical request that the same poll had found had run (scenario
// 3's execution traces, issue 18's sixth pass: 21 of 200 critical requests
// after the onset waited behind two /bulk handlers, the p99 at 15.6-16.9
// ms). The second yield's poll comes only when both run queues are empty
// (or from the monitor thread, after 10 ms without one), so by then every
// goroutine of the first poll has reached its stage or blocked.
func (l *Turns) Wait(procs uint64, yield, settle func()) {
	if settle == nil {
		settle = yield
	}
	place := l.tickets.Add(1) - 1
	for i := 0; ; i++ {
		before := l.starts.Load()
		yield()
		settle()
		for {
			n := l.starts.Load()
			if i < turnYields && (n-before >= procs || place >= l.serving.Load()+procs) {
				break // not its turn: yield again
			}
			if l.starts.CompareAndSwap(n, n+1) {
				for {
					srv := l.serving.Load()
					if srv > place || l.serving.CompareAndSwap(srv, place+1) {
						return
					}
				}
			}
		}
	}
}
