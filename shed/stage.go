package shed

import (
	"context"
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

	mu        sync.Mutex
	turn      time.Duration // see effectiveTarget (under mu, as everything below)
	lastTick  time.Time     // end of the last interval
	lastAdmit uint64        // admissions counted at lastTick
	q         [tier.CriticalPlus + 1]deque
	det       [tier.CriticalPlus + 1]Detector // one CoDel detector per tier queue
	lim       *Limiter
	lastPol   *policy
	lastOver  time.Time // last interval end at which the endpoint was overloaded, or last overload drop
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
	st.lim = NewLimiter(p.limitFor(name))
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
// The zero Ticket's Release does nothing.
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
			st.s.rq.observe(now)
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

func (st *stage) maybeTick(now time.Time) {
	if now.UnixNano() < st.nextTick.Load() {
		return
	}
	p := st.s.pol.Load()
	st.mu.Lock()
	st.tickLocked(now, p)
	st.dispatchLocked(now, p)
	st.armLocked(now)
	st.mu.Unlock()
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

// acquire admits a request of tier t or returns a *Rejection.
func (st *stage) acquire(ctx context.Context, t tier.Tier, p *policy) (Ticket, error) {
	tk, err := st.admit(ctx, t, p)
	if err == nil && st.busy() && (p.sheddable(t) || st.contended()) {
		// Requests wait in the run queue before they reach the stage:
		// let them come in (and queue, by tier) before this handler
		// takes the processor. See schedwait.go.
		st.s.yield()
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
		st.m.shed[t][ReasonTier].Inc()
		return Ticket{}, reject(ReasonTier)
	}
	if timed && st.s.rq != nil {
		st.s.rq.observe(now)
	}
	if timed {
		if hasDL && st.rejectDeadline(dl, now) {
			st.m.shed[t][ReasonDeadline].Inc()
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
		st.m.shed[t][ReasonDeadline].Inc()
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
		st.m.shed[t][ReasonQueueFull].Inc()
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
		st.m.shed[t][ReasonDeadline].Inc()
		return Ticket{}, reject(ReasonDeadline)
	}
}

// recordAllLocked records a wait in every tier's detector: a request that
// started with the queue empty shows that no tier had a standing queue.
func (st *stage) recordAllLocked(wait time.Duration) {
	for t := range st.det {
		st.det[t].record(wait)
		st.det[t].drained = true
		st.det[t].aboveSince = time.Time{}
	}
}

// effectiveTarget (under mu) is the CoDel target of the stage: the configured one, or
// two turns when that is longer. A turn is the time the queue takes to
// advance by one request (see measureTurn). Random arrivals wait about two
// turns at 80% load without any overload (the mean wait of an M/D/1 queue at
// ρ = 0.8 is twice the service time), so a shorter target sheds at loads
// the endpoint can serve; for a CPU-bound handler of 5 ms on one processor
// the target becomes 10 ms, for many slots of a slow dependency it stays
// 5 ms.
func (st *stage) effectiveTarget(p *policy) time.Duration {
	return max(p.target, turnsTarget*st.turn)
}

// turnsTarget is the number of turns the effective target allows.
const turnsTarget = 2

// measureTurn sets the turn at the end of an interval of length d (under
// mu): the interval over the requests admitted in it, at most the service
// time (the limiter's baseline; in a cold stage without one, this window's
// mean service time; with neither, the interval alone). Admissions stand for
// completions, which over an interval they match but for the requests in
// flight, because they are counted anyway (the wait histogram): the request
// path pays for nothing more.
func (st *stage) measureTurn(d time.Duration) {
	a := st.m.admitted()
	n := int64(a - st.lastAdmit)
	st.lastAdmit = a
	svc := time.Duration(st.minService.Load())
	if svc == 0 && st.rttN.Load() > 0 {
		svc = time.Duration(st.rttSum.Load() / st.rttN.Load())
	}
	turn := svc
	if n > 0 && d > 0 {
		turn = d / time.Duration(n)
		if svc > 0 {
			turn = min(svc, turn)
		}
	}
	st.turn = turn
}

// upstream reports whether requests are queued before the stage: the
// processors are saturated and the runtime's run queue has a backlog. Then
// an empty stage queue is not a drained one.
func (st *stage) upstream() bool {
	return st.s.rq != nil && st.s.rq.saturated()
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
	return st.s.rq != nil && st.s.rq.busy()
}

// markIdle notes, without a lock, that the queue was empty for a moment: a
// request started without waiting, or a slot freed with nobody waiting.
// While requests are on their way to the stage (upstream) that is no drain.
func (st *stage) markIdle() {
	if !st.upstream() && !st.zeroSeen.Load() {
		st.zeroSeen.Store(true)
	}
}

// evictLocked makes room in a full queue for a request of tier t by dropping
// the oldest waiter of the lowest sheddable tier below t.
func (st *stage) evictLocked(t tier.Tier, p *policy, now time.Time) bool {
	for v := tier.Sheddable; v < t && p.sheddable(v); v++ {
		if w := st.q[v].popFront(); w != nil {
			st.queued.Add(-1)
			st.dropLocked(w, ReasonQueueFull, now)
			return true
		}
	}
	return false
}

// dropLocked sheds waiter w for reason r at now. An overload drop raises the
// floor to w's tier and restarts FloorHold: the tiers below stay refused for
// FloorHold after the last drop, not after the last interval that ended
// overloaded (a tier's queue can still be swept after that, and a lower tier
// let in within the second would break the order).
func (st *stage) dropLocked(w *waiter, r Reason, now time.Time) {
	w.state = wDropped
	w.reason = r
	st.m.shed[w.tier][r].Inc()
	if r == ReasonOverload {
		if uint32(w.tier) > st.floor.Load() {
			st.floor.Store(uint32(w.tier))
		}
		st.shedding.Store(true)
		if now.After(st.lastOver) {
			st.lastOver = now
		}
	}
	w.ready <- struct{}{}
}

// dispatchLocked hands free slots to waiters: highest tier first, FIFO
// within a tier, newest first while overloaded. Waiters that waited too long
// (CoDel) or whose deadline is too close are dropped instead.
func (st *stage) dispatchLocked(now time.Time, p *policy) {
	minSvc := time.Duration(st.minService.Load())
	for st.queued.Load() > 0 {
		n := st.inflight.Load()
		if n >= st.limit.Load() {
			return
		}
		var w *waiter
		for t := tier.CriticalPlus; t >= tier.Sheddable && w == nil; t-- {
			if st.lifo(t, now, p) {
				w = st.q[t].popBack()
			} else {
				w = st.q[t].popFront()
			}
		}
		if w == nil {
			return
		}
		st.queued.Add(-1)
		wait := now.Sub(w.arrival)
		// The detector's sample is the wait of the oldest request of the
		// tier, the one FIFO would serve: served newest first, a standing
		// queue still shows (see lifo).
		sample := wait
		if f := st.q[w.tier].front(); f != nil {
			sample = max(sample, now.Sub(f.arrival))
		}
		if st.shedding.Load() && p.sheddable(w.tier) && uint32(w.tier) < st.floor.Load() {
			st.dropLocked(w, ReasonTier, now)
			continue
		}
		if !w.deadline.IsZero() && w.deadline.Sub(now) < minSvc {
			st.dropLocked(w, ReasonDeadline, now)
			continue
		}
		if p.sheddable(w.tier) && st.det[w.tier].Drop(wait) {
			st.dropLocked(w, ReasonOverload, now)
			continue
		}
		// Priority: every tier above w's is empty while a slot is handed
		// out, so capacity has caught up with them.
		if !st.upstream() {
			for t := w.tier + 1; t <= tier.CriticalPlus; t++ {
				st.det[t].MarkDrained(now)
			}
		}
		st.inflight.Add(1)
		st.noteInflight(n + 1)
		st.det[w.tier].record(sample)
		st.det[w.tier].streak(now, sample)
		if st.det[w.tier].Overloaded() && p.sheddable(w.tier) {
			st.overloaded.Store(true)
		}
		w.state = wGranted
		st.m.wait[w.tier].observe(wait)
		w.ready <- struct{}{}
	}
}

// lifo reports whether tier t's queue is served newest first: while the
// tier is overloaded (adaptive LIFO), and as soon as its oldest request has
// waited longer than an overloaded tier would let it (2 × target). CoDel
// needs a whole interval of waits above target to call an overload; served
// oldest first until then, an overload that starts at once has every
// request of that interval wait for the ones before it (100-150 ms for a 6×
// step on one core). Served newest first, fresh requests start at once, and
// the old ones are dropped when the overload is called or served if the
// burst drains first. Detection does not change: it samples the oldest
// waiter's wait, which is what FIFO would have served.
func (st *stage) lifo(t tier.Tier, now time.Time, p *policy) bool {
	if st.det[t].Overloaded() {
		return true
	}
	if !p.sheddable(t) {
		return false // nobody would drop its old requests: they would starve
	}
	f := st.q[t].front()
	return f != nil && now.Sub(f.arrival) > 2*st.det[t].target()
}

// sweepLocked drops, while overloaded, every sheddable waiter that has
// waited longer than 2 × target, lowest tier first. Under adaptive LIFO the
// oldest waiters are never at the serving end, so they leave here.
func (st *stage) sweepLocked(now time.Time, p *policy) {
	if !st.overloaded.Load() {
		return
	}
	for t := tier.Sheddable; p.sheddable(t) && t <= tier.CriticalPlus; t++ {
		for {
			w := st.q[t].front()
			if w == nil || !st.det[t].Drop(now.Sub(w.arrival)) {
				break
			}
			st.q[t].popFront()
			st.queued.Add(-1)
			st.dropLocked(w, ReasonOverload, now)
		}
	}
	// Dropping stale waiters does not drain a queue: they leave because it
	// stands. A queue drains when a slot is free with nobody of its tier
	// waiting (see dispatchLocked, Release and zeroSeen).
}

// tickLocked closes the detector's interval and moves the limit when the
// interval has ended.
func (st *stage) tickLocked(now time.Time, p *policy) {
	if next := st.nextTick.Load(); next != 0 && now.UnixNano() < next {
		return
	}
	if st.s.rq != nil {
		st.s.rq.observe(now)
	}
	up := st.upstream()
	// A stage with nothing in flight and nothing waiting at the end of an
	// interval has drained, even when its last slot freed while requests
	// were still on their way (upstream then, so zeroSeen was not set):
	// the load is over, and the state must say so.
	idle := !up && st.inflight.Load() == 0 && st.queued.Load() == 0
	if st.zeroSeen.Swap(false) || idle {
		st.recordAllLocked(0)
	}
	over := false
	if !st.lastTick.IsZero() {
		st.measureTurn(now.Sub(st.lastTick))
	}
	st.lastTick = now
	target := st.effectiveTarget(p)
	for t := tier.Sheddable; t <= tier.CriticalPlus; t++ {
		d := &st.det[t]
		d.Target, d.Interval = target, p.interval
		var headWait time.Duration
		w := st.q[t].front()
		if w != nil {
			headWait = now.Sub(w.arrival)
		}
		if d.Advance(now, headWait, w != nil) && p.sheddable(t) {
			over = true
		}
		if up {
			d.Backlogged()
		}
	}
	if p != st.lastPol {
		st.lim.SetConfig(p.limitFor(st.name))
		st.lastPol = p
	}
	w := Window{Count: st.rttN.Load(), Sum: time.Duration(st.rttSum.Load()), MaxInflight: st.maxInflight.Load(), Saturated: up, Queued: st.waited, Waiting: st.queued.Load()}
	if st.lim.Update(w) {
		st.rttN.Add(-w.Count)
		st.rttSum.Add(-int64(w.Sum))
		st.maxInflight.Store(st.inflight.Load())
		st.waited = st.queued.Load() > 0
		if st.lim.SelfLimited() {
			// The queue stood behind the limit, not the endpoint: the
			// latency stayed flat, and the limit grew (slow start).
			// Nothing is shed for it; the next interval judges the new
			// limit.
			for t := range st.det {
				st.det[t].Forgive()
			}
			over = false
		}
	}
	st.overloaded.Store(over)
	if over {
		st.lastOver = now
	}
	// The floor outlives the overload by FloorHold, so that a short calm
	// spell inside an overload does not let the lowest tier in between two
	// sheds of a higher one (strict order); then it decays a tier per
	// interval.
	shedding := over || now.Sub(st.lastOver) < FloorHold
	st.shedding.Store(shedding)
	if !shedding {
		if f := st.floor.Load(); f > 0 {
			st.floor.Store(f - 1)
		}
	}
	limit := st.lim.Limit()
	st.limit.Store(int64(limit))
	st.minService.Store(int64(st.lim.Baseline()))
	st.nextTick.Store(st.det[tier.Sheddable].NextEnd().UnixNano())

}

// armLocked keeps a timer pending while requests wait, so that the queue
// is swept and the detector advanced even when no request arrives or
// completes: at the interval's end, or after one target while overloaded.
// While the endpoint is overloaded with nobody waiting (the load may have
// stopped), it keeps one pending for the interval's end, so that the
// overload state clears within an interval of the load's end even if no
// request ever comes again.
func (st *stage) armLocked(now time.Time) {
	if st.armed || st.closed {
		return
	}
	queued, over := st.queued.Load() > 0, st.overloaded.Load()
	if !queued && !over {
		return
	}
	d := time.Duration(st.nextTick.Load() - now.UnixNano())
	if queued && over {
		d = min(d, st.det[tier.Sheddable].target())
	}
	d = max(d, time.Millisecond)
	st.armed = true
	st.timer = st.s.clk.AfterFunc(d, st.onTimer)
}

func (st *stage) onTimer() {
	p := st.s.pol.Load()
	st.mu.Lock()
	defer st.mu.Unlock()
	st.armed = false
	if st.closed {
		return
	}
	now := st.s.clk.Now()
	st.tickLocked(now, p)
	st.sweepLocked(now, p)
	st.dispatchLocked(now, p)
	st.armLocked(now)
}

func (st *stage) close() {
	st.s.m.state.remove(st)
	st.mu.Lock()
	defer st.mu.Unlock()
	st.closed = true
	if st.armed && st.timer != nil {
		st.timer.Stop()
		st.armed = false
	}
}

// deque is a double-ended queue of waiters with lazy removal: a waiter that
// left (wGone) stays in the buffer until it reaches an end.
type deque struct {
	buf  []*waiter
	head int
	live int
}

func (d *deque) push(w *waiter) {
	if d.head > 0 && d.head >= len(d.buf)/2 {
		n := copy(d.buf, d.buf[d.head:])
		clear(d.buf[n:])
		d.buf = d.buf[:n]
		d.head = 0
	}
	d.buf = append(d.buf, w)
	d.live++
}

// front returns the oldest waiting waiter without removing it.
func (d *deque) front() *waiter {
	for d.head < len(d.buf) {
		w := d.buf[d.head]
		if w.state == wWaiting {
			return w
		}
		d.buf[d.head] = nil
		d.head++
	}
	return nil
}

func (d *deque) popFront() *waiter {
	w := d.front()
	if w == nil {
		return nil
	}
	d.buf[d.head] = nil
	d.head++
	d.live--
	return w
}

func (d *deque) popBack() *waiter {
	for len(d.buf) > d.head {
		w := d.buf[len(d.buf)-1]
		d.buf[len(d.buf)-1] = nil
		d.buf = d.buf[:len(d.buf)-1]
		if w.state == wWaiting {
			d.live--
			return w
		}
	}
	return nil
}
