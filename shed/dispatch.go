package shed

import (
	"time"

	"github.com/veerhq/veer/tier"
)

// Handing slots to waiters, and dropping them: the queue discipline
// (highest tier first, adaptive LIFO), the CoDel sweep and the evictions of
// a full queue. Everything here runs under stage.mu.

// recordAllLocked records a wait in every tier's detector: a request that
// started with the queue empty shows that no tier had a standing queue.
func (st *stage) recordAllLocked(wait time.Duration) {
	for t := range st.det {
		st.det[t].record(wait)
		st.det[t].drained = true
		st.det[t].aboveSince = time.Time{}
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
	st.count(w.tier, r)
	if r == ReasonOverload {
		st.det[w.tier].Dropped(now)
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
		if st.dropDueLocked(w.tier, now, wait) && st.mayShedLocked(w.tier, p) {
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
//
// A sheddable tier that is not part of the excess (see demand) is served
// oldest first: its old requests would not be dropped, and served newest
// first they would starve.
func (st *stage) lifo(t tier.Tier, now time.Time, p *policy) bool {
	if !p.sheddable(t) {
		return st.det[t].Overloaded()
	}
	if !st.det[t].Overloaded() {
		f := st.q[t].front()
		if f == nil || now.Sub(f.arrival) <= 2*st.det[t].target() {
			return false
		}
	}
	return st.mayShedLocked(t, p)
}

// sweepLocked drops, while overloaded, every sheddable waiter that has
// waited longer than 2 × target, lowest tier first. Under adaptive LIFO the
// oldest waiters are never at the serving end, so they leave here.
func (st *stage) sweepLocked(now time.Time, p *policy) {
	if !st.overloaded.Load() {
		return
	}
	for t := tier.Sheddable; p.sheddable(t) && t <= tier.CriticalPlus; t++ {
		gated := false // checked once per tier, when its first drop is due
		for {
			w := st.q[t].front()
			if w == nil || !st.dropDueLocked(t, now, now.Sub(w.arrival)) {
				break
			}
			if !gated {
				if !st.mayShedLocked(t, p) {
					break
				}
				gated = true
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
