package shed

import (
	"time"

	"github.com/veerhq/veer/tier"
)

// The stage's clock: intervals end (tickLocked: the detectors advance, the
// limit moves, the floor decays), and a timer keeps them ending while
// requests wait or an overload has not yet been cleared (armLocked).

// maybeTick closes the current interval if it has ended by now.
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
// mean service time). With no admission in the interval it is the service
// time, and with no service time known either it is 0 (the CoDel target
// then stands alone: effectiveTarget). Admissions stand for
// completions, which over an interval they match but for the requests in
// flight, because they are counted anyway (the wait histogram): the request
// path pays for nothing more.
func (st *stage) measureTurn(d time.Duration) (admitted int64) {
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
	return n
}

// tickLocked closes the detector's interval and moves the limit when the
// interval has ended.
func (st *stage) tickLocked(now time.Time, p *policy) {
	if next := st.nextTick.Load(); next != 0 && now.UnixNano() < next {
		return
	}
	if st.s.rq != nil {
		st.s.rq.Observe(now)
	}
	up := st.upstream()
	// A stage with nothing in flight and nothing waiting at the end of an
	// interval has drained, even when its last slot freed while requests
	// were still on their way (upstream then, so zeroSeen was not set):
	// the load is over, and the state must say so.
	idle := !up && st.inflight.Load() == 0 && st.queued.Load() == 0
	drained := st.zeroSeen.Swap(false) || idle
	if drained {
		st.recordAllLocked(0)
	}
	over := false
	if !st.lastTick.IsZero() {
		admitted := st.measureTurn(now.Sub(st.lastTick))
		rej := st.rejected.Load()
		n := rej - st.lastRej
		st.lastRej = rej
		if st.storm.Load() {
			// Held refusals come back more slowly: stay in the storm
			// until refusals are few, or well below the admissions.
			st.storm.Store(n >= stormMinRejects/2 && 2*n >= admitted)
		} else {
			st.storm.Store(n >= stormMinRejects && n > admitted)
		}
		st.deepStorm.Store(st.deepNext(st.storm.Load(), n >= stormDeepRatio*max(admitted, 1)))
	}
	st.lastTick = now
	st.dem.push(st.snapLocked(), !drained && st.queued.Load() > 0)
	target := st.effectiveTarget(p)
	for t := tier.Sheddable; t <= tier.CriticalPlus; t++ {
		d := &st.det[t]
		d.Target, d.Interval = target, p.interval
		var headWait time.Duration
		w := st.q[t].front()
		if w != nil {
			headWait = now.Sub(w.arrival)
		}
		// Overloaded for the floor and its hold only through a tier that
		// may be shed: a standing queue of a tier the demand gate does not
		// drop (a stall's held-back requests) must not keep the lower tiers
		// refused (TestModelStallAtOnset).
		if d.Advance(now, headWait, w != nil) && st.mayShedLocked(t, p) {
			over = true
		}
		if up {
			d.Backlogged()
		}
	}
	st.configureLocked(p)
	if st.winStart.IsZero() {
		st.winStart = now
	}
	w := window{Count: st.rttN.Load(), Sum: time.Duration(st.rttSum.Load()), MaxInflight: st.maxInflight.Load(), Saturated: up, Queued: st.waited, Waiting: st.queued.Load(), Span: now.Sub(st.winStart)}
	if st.lim.Update(w) {
		st.winStart = now
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
	st.dem.noteShedding(now, shedding)
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

// configure puts p's limit for this endpoint into force at once: a reload
// or an admin change takes effect on an idle stage too, not at its next
// tick (which runs only while requests queue).
func (st *stage) configure(p *policy) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.configureLocked(p)
	st.limit.Store(int64(st.lim.Limit()))
}

func (st *stage) configureLocked(p *policy) {
	if p != st.lastPol {
		st.lim.SetConfig(p.limitFor(st.name))
		st.lastPol = p
	}
}
