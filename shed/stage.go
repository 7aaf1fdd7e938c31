package shed

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/tier"
)

// stage is the admission stage of one endpoint: a number of slots (the
// concurrency limit) with a queue per tier in front, and a CoDel detector
// per tier queue. Per-tier detection matters: the highest tier is served
// first and rarely waits, so a single detector over all requests would see
// its short waits and never notice the standing queue of the lower tiers.
// The endpoint is overloaded while any sheddable tier's queue is.
//
// The unloaded path is lock-free: while nobody is queued and a slot is free,
// a request takes the slot with one compare-and-swap. Everything else (the
// queue, the detector, the limiter) runs under mu. Queue discipline: the
// highest tier waiting is served first; within a tier FIFO, or newest first
// (adaptive LIFO) while the tier is overloaded or, for a sheddable tier, has
// a request that waited 2 × target (see lifo), so that fresh requests meet
// their deadlines while stale ones are dropped by the CoDel sweep.
type stage struct {
	name string
	s    *Shedder
	m    *stageMetrics

	inflight    atomic.Int64
	limit       atomic.Int64
	queued      atomic.Int64 // live waiters
	overloaded  atomic.Bool
	floor       atomic.Uint32 // while shedding, tiers below floor are rejected on arrival
	shedding    atomic.Bool   // overloaded now or within FloorHold: the floor applies
	zeroSeen    atomic.Bool   // a request started without waiting, or a slot freed with nobody queued, in this interval
	nextTick    atomic.Int64  // unix ns of the end of the current interval; 0 before the first
	seq         atomic.Uint32 // request counter for clock sampling
	minService  atomic.Int64  // limiter baseline (ns), for deadline checks
	rttSum      atomic.Int64
	rttN        atomic.Int64
	maxInflight atomic.Int64
	rejected    atomic.Int64                        // refusals so far (every reason)
	refused     [tier.CriticalPlus + 1]atomic.Int64 // refusals so far, by tier (the demand gate's arrivals)
	storm       atomic.Bool                         // the last interval refused more than it admitted (see pace.go)
	deepStorm   atomic.Bool                         // a closed-loop storm: the default hold is on (pace.go, deepNext)

	mu        sync.Mutex
	turn      time.Duration // see effectiveTarget (under mu, as everything below)
	lastTick  time.Time     // end of the last interval
	lastAdmit uint64        // admissions counted at lastTick
	lastRej   int64         // refusals counted at lastTick
	deepPrev  bool          // the last interval refused stormDeepRatio × its admissions (deepNext)
	deepCalm  int           // intervals without a storm since the deep storm's last (deepNext)
	q         [tier.CriticalPlus + 1]deque
	det       [tier.CriticalPlus + 1]detector // one CoDel detector per tier queue
	lim       *limiter
	lastPol   *policy
	lastOver  time.Time // last interval end at which the endpoint was overloaded, or last overload drop
	dem       demand    // counts at the last interval ends (the demand gate)
	winStart  time.Time // start of the limiter's current window
	waited    bool      // a request queued since the limiter's last window
	timer     clock.Timer
	armed     bool
	closed    bool
}

// Waiter states.
const (
	wWaiting uint8 = iota
	wGranted
	wDropped
	wGone // left the queue (context done)
)

type waiter struct {
	arrival  time.Time
	deadline time.Time // zero: none
	tier     tier.Tier
	state    uint8
	reason   Reason
	ready    chan struct{}
}

func newStage(s *Shedder, name string, p *policy) *stage {
	st := &stage{name: name, s: s, m: s.m.forEndpoint(name)}
	st.lim = newLimiter(p.limitFor(name))
	st.lim.seed(name)
	st.lastPol = p
	st.limit.Store(int64(st.lim.Limit()))
	s.m.state.add(st)
	return st
}

// refresh closes an interval that has ended (so that an overload state does
// not outlive the load) and returns the stage's state.
func (st *stage) refresh() EndpointStats {
	st.maybeTick(st.s.clk.Now())
	return EndpointStats{
		Endpoint:   st.name,
		Overloaded: st.overloaded.Load(),
		Limit:      int(st.limit.Load()),
		Inflight:   int(st.inflight.Load()),
		Queued:     int(st.queued.Load()),
		Baseline:   time.Duration(st.minService.Load()),
	}
}

// Ticket is an admitted request's slot; Release it when the handler returns.
// The zero Ticket's Release does nothing. Public: Acquire returns it to
// adapters other than Middleware (shedgrpc, a gateway).
type Ticket struct {
	st    *stage
	start time.Time
}

// Release frees the slot and records the service time.
func (t Ticket) Release() {
	st := t.st
	if st == nil {
		return
	}
	if t.start.IsZero() { // an untimed (unsampled) request
		st.inflight.Add(-1)
		if st.queued.Load() == 0 {
			st.markIdle()
			return
		}
	} else {
		now := st.s.clk.Now()
		if st.s.rq != nil {
			st.s.rq.Observe(now)
		}
		st.rttSum.Add(int64(now.Sub(t.start)))
		st.rttN.Add(1)
		st.inflight.Add(-1)
		if st.queued.Load() == 0 {
			st.markIdle()
			st.maybeTick(now)
			return
		}
	}
	{
		now := st.s.clk.Now()
		p := st.s.pol.Load()
		st.mu.Lock()
		st.tickLocked(now, p)
		st.sweepLocked(now, p)
		st.dispatchLocked(now, p)
		st.mu.Unlock()
	}
}

// count records a refusal of a request of tier t for reason r.
func (st *stage) count(t tier.Tier, r Reason) {
	st.m.shed[t][r].Inc()
	st.rejected.Add(1)
	st.refused[t].Add(1)
}

func (st *stage) noteInflight(n int64) {
	for {
		m := st.maxInflight.Load()
		if n <= m || st.maxInflight.CompareAndSwap(m, n) {
			return
		}
	}
}

// sampleEvery is how often (one request in sampleEvery) the unloaded path
// reads the clock to measure service time. Reading the clock is the most
// expensive step of admission on many machines (a system call where the
// vDSO has no stable TSC); a 1-in-8 sample gives the limiter an unbiased mean.
// Requests with a deadline, and every request while the endpoint is
// overloaded or queued, are always timed.
const sampleEvery = 8

// FloorHold is how long after its last overloaded interval an endpoint
// keeps rejecting the tiers below the one it last shed.
const FloorHold = time.Second

// rejectTier reports whether a request of tier t is rejected on arrival
// because the endpoint is shedding a higher tier.
func (st *stage) rejectTier(t tier.Tier, p *policy) bool {
	return p.sheddable(t) && st.shedding.Load() && uint32(t) < st.floor.Load()
}

// rejectDeadline reports whether a deadline leaves less time than the
// endpoint's unloaded service time.
func (st *stage) rejectDeadline(dl, now time.Time) bool {
	return dl.Sub(now) < time.Duration(st.minService.Load())
}

// processors is implemented by a run queue whose processors are not the
// runtime's (the virtual-time models' one core).
type processors interface{ procs() int }

// turnProcs is how many sheddable handlers may start per poll: GOMAXPROCS.
func (s *Shedder) turnProcs() uint64 {
	if p, ok := s.rq.(processors); ok {
		return uint64(p.procs())
	}
	return uint64(runtime.GOMAXPROCS(0))
}

// acquire admits a request of tier t or returns a *Rejection.
func (st *stage) acquire(ctx context.Context, t tier.Tier, p *policy) (Ticket, error) {
	tk, err := st.admit(ctx, t, p)
	if err == nil && !st.s.ioBound && st.busy() {
		if !p.sheddable(t) {
			st.s.turns.NoteNeverShed(st.s.clk.Now())
		}
		if p.sheddable(t) || st.contended() {
			// Requests wait in the run queue before they reach the
			// stage: let them come in (and queue, by tier) before this
			// handler takes the processor. See shed/internal/runq; while
			// the processors are saturated and never-shed requests come,
			// a sheddable tier also waits for its start turn (runq.Turns).
			if p.sheddable(t) && st.upstream() && st.s.turns.Wanted(st.s.clk.Now()) {
				st.s.turns.Wait(st.s.turnProcs(), st.s.yield, st.s.settle)
			} else {
				st.s.yield()
			}
		}
	}
	return tk, err
}

func (st *stage) admit(ctx context.Context, t tier.Tier, p *policy) (Ticket, error) {
	dl, hasDL := ctx.Deadline()
	var now time.Time
	timed := hasDL || st.shedding.Load() || st.seq.Add(1)%sampleEvery == 0
	if timed {
		now = st.s.clk.Now()
		st.maybeTick(now) // an overload state may be stale after a quiet spell
	}
	if st.rejectTier(t, p) {
		st.count(t, ReasonTier)
		return Ticket{}, reject(ReasonTier)
	}
	if timed && st.s.rq != nil {
		st.s.rq.Observe(now)
	}
	if timed {
		if hasDL && st.rejectDeadline(dl, now) {
			st.count(t, ReasonDeadline)
			return Ticket{}, reject(ReasonDeadline)
		}
	}
	if st.queued.Load() == 0 {
		for {
			n := st.inflight.Load()
			if n >= st.limit.Load() {
				break
			}
			if st.inflight.CompareAndSwap(n, n+1) {
				st.markIdle()
				st.noteInflight(n + 1)
				st.m.wait[t].observeZero()
				return Ticket{st: st, start: now}, nil
			}
		}
	}
	if !timed {
		now = st.s.clk.Now()
	}
	return st.wait(ctx, t, p, now)
}

// wait is the loaded path: queue the request until a slot frees, it is
// dropped, or its context ends.
func (st *stage) wait(ctx context.Context, t tier.Tier, p *policy, now time.Time) (Ticket, error) {
	if ctx.Err() != nil { // the caller is gone (HTTP: the client closed)
		st.count(t, ReasonDeadline)
		return Ticket{}, reject(ReasonDeadline)
	}
	st.mu.Lock()
	st.tickLocked(now, p)
	st.sweepLocked(now, p)
	if st.queued.Load() == 0 {
		if n := st.inflight.Load(); n < st.limit.Load() {
			st.inflight.Add(1)
			st.noteInflight(n + 1)
			if !st.upstream() {
				st.recordAllLocked(0)
			}
			st.mu.Unlock()
			st.m.wait[t].observeZero()
			return Ticket{st: st, start: now}, nil
		}
	}
	if int(st.queued.Load()) >= p.maxQueue && !st.evictLocked(t, p, now) {
		st.mu.Unlock()
		st.count(t, ReasonQueueFull)
		return Ticket{}, reject(ReasonQueueFull)
	}
	w := &waiter{arrival: now, tier: t, ready: make(chan struct{}, 1)}
	w.deadline, _ = ctx.Deadline()
	st.q[t].push(w)
	st.queued.Add(1)
	st.waited = true
	st.dispatchLocked(now, p) // a slot may have freed since the check above
	st.armLocked(now)
	st.mu.Unlock()

	select {
	case <-w.ready:
	case <-ctx.Done():
	}
	st.mu.Lock()
	switch w.state {
	case wGranted:
		st.mu.Unlock()
		return Ticket{st: st, start: st.s.clk.Now()}, nil
	case wDropped:
		st.mu.Unlock()
		return Ticket{}, reject(w.reason)
	default: // still waiting: the context ended
		w.state = wGone
		st.q[t].live--
		st.queued.Add(-1)
		st.mu.Unlock()
		st.count(t, ReasonDeadline)
		return Ticket{}, reject(ReasonDeadline)
	}
}

// upstream reports whether requests are queued before the stage: the
// processors are saturated and the runtime's run queue has a backlog. Then
// an empty stage queue is not a drained one.
func (st *stage) upstream() bool {
	return st.s.rq != nil && st.s.rq.Saturated()
}

// contended reports whether the endpoint is shedding or has requests
// waiting: then even a request of a tier that is never shed yields while
// the run queue is busy (see acquire), so that the requests behind it in the
// run queue reach the stage, and are ordered and shed, before its handler
// holds the processor. An endpoint without contention lets its requests
// start at once: a quiet endpoint beside a spiking one must not wait for
// the spike's run queue to drain.
func (st *stage) contended() bool {
	return st.shedding.Load() || st.queued.Load() > 0
}

// busy reports whether the runtime's run queue had a backlog lately.
func (st *stage) busy() bool {
	return st.s.rq != nil && st.s.rq.Busy()
}

// markIdle notes, without a lock, that the queue was empty for a moment: a
// request started without waiting, or a slot freed with nobody waiting.
// While requests are on their way to the stage (upstream) that is no drain.
func (st *stage) markIdle() {
	if !st.upstream() && !st.zeroSeen.Load() {
		st.zeroSeen.Store(true)
	}
}
