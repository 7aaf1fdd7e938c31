// Package runq is shed's engine for the queue in front of the stage: the
// Go scheduler's run queue. It holds the process-wide machinery that reads
// and steers the Go runtime, apart from shed's decision core (stages,
// CoDel, tiers, limits, pacing), which takes it as three small pieces.
//
// Why it exists. On a CPU-bound server most of the queue is not in the
// admission stage at all: Go's net/http reads a request and calls the
// handler on one goroutine, and while the processors are busy running
// handlers, the goroutines of newly readable connections wait in the Go
// scheduler's run queues before the middleware ever runs. Handlers that do
// not block run one after the other per processor, so the stage sees at most
// GOMAXPROCS requests in flight, its slots never fill, nothing queues in it
// and CoDel never sees a wait, however long requests really waited.
//
// Two things bring that queue into the stage, where it has tiers, CoDel and
// adaptive LIFO:
//
//   - While the run queue has a backlog (Queue.Busy), an admitted request of
//     a sheddable tier yields its processor before its handler runs, until
//     the runtime next polls the network (Yield). The goroutines waiting in
//     the run queue, and those of the requests the poll finds, then parse
//     their requests and reach the stage, where they queue for a slot and
//     are measured, ordered and shed. One poll serves every request that
//     yields before it.
//   - While the processors are saturated as well (Queue.Saturated: the
//     process used at least 90% of GOMAXPROCS over the last 50 ms), an empty
//     stage queue is not a drained one (requests are still on their way to
//     it), and a sheddable handler starts only in its turn (Turns.Wait), so
//     that the runtime polls the network between two of them.
//
// Contract. Everything here is process-wide, like the processors and the
// run queue it describes: Process, ProcessTurns and the yield counters
// (NewCollector exports them as veer_shed_run_queue_yields_total) are shared
// by every Shedder in the process. Queue's Busy and Saturated and
// Turns.Wanted never block and allocate nothing; Observe samples the runtime
// at most every 10 ms (a read of the scheduler statistics). Yield leaves
// nothing behind a call (the descriptor it waits on is the process's,
// opened once), so it is safe in a testing/synctest bubble, beside yields
// outside it, and under goroutine-leak checks. Turns.Wait returns after at
// most 17 rounds of yields whatever the other requests do: progress never
// depends on winning a race.
//
// Failure modes. Where no descriptor can be polled (not Unix, or the
// eventfd or pipe cannot be made or polled) or a write fails, Yield falls
// back to runtime.Gosched, counted as kind="gosched"; the stage still works,
// it only sees less of the queue in front of it. Where the process CPU time
// cannot be read, a backlog counts as saturation. With several processors
// another may poll before a leader parks: the yield is then as short as
// runtime.Gosched.
package runq
