package shed

import "time"

// detector is the CoDel overload test of one endpoint (folly's Codel
// semantics, as used by QALM). It is a pure state machine: the caller passes
// the time, so it runs the same on the wall clock and on clock.Manual.
//
// Time is cut into intervals. During an interval the detector keeps the
// minimum queue wait (arrival to handler start) of the requests that started.
// When an interval ends, the endpoint is overloaded for the next interval if
// that minimum exceeded Target: even the luckiest request had to wait, so the
// queue never drained. A standing queue whose head is still waiting at the end
// of the interval counts as a sample of its current wait, so a queue that is
// stuck (no request starts at all) is detected too. An interval with no
// sample and no queue clears the overload.
//
// Once overloaded, the endpoint stays overloaded until an interval in which
// its queue drained (became empty at least once, MarkDrained), even if some
// requests started quickly: under adaptive LIFO the newest requests start
// at once while older ones wait, so a short minimum wait no longer shows
// that the standing queue is gone. Without this hysteresis the state flaps
// every interval, and each calm interval lets a FIFO queue build up again.
//
// While overloaded, a request that has waited longer than 2 × Target is
// dropped (Drop reports true).
type detector struct {
	// Target is the acceptable standing queue wait; default 5ms.
	Target time.Duration
	// Interval is the length of a measurement interval; default 100ms.
	Interval time.Duration

	start      time.Time // start of the current interval; zero before the first call
	min        time.Duration
	seen       bool
	drained    bool      // the queue was empty at some point of the interval
	aboveSince time.Time // start of the current run of waits above Target
	overloaded bool
	since      time.Time // when the standing queue of the current overload began
	lastDrop   time.Time // this tier's last overload drop (Dropped)
}

func (d *detector) target() time.Duration {
	if d.Target <= 0 {
		return DefaultTarget
	}
	return d.Target
}

func (d *detector) interval() time.Duration {
	if d.Interval <= 0 {
		return DefaultInterval
	}
	return d.Interval
}

// Observe records that a request started at now after waiting wait.
func (d *detector) Observe(now time.Time, wait time.Duration) {
	d.Advance(now, 0, false)
	d.record(wait)
	d.streak(now, wait)
}

// streak implements CoDel's onset rule between interval ends: when waits
// have stayed above Target for a whole Interval (every sample since the
// first one above it), the endpoint is overloaded at once, without waiting
// for the aligned interval to end. A wait at or below Target ends the streak.
func (d *detector) streak(now time.Time, wait time.Duration) {
	if wait <= d.target() {
		d.aboveSince = time.Time{}
		return
	}
	if d.aboveSince.IsZero() {
		d.aboveSince = now
		return
	}
	if !d.overloaded && now.Sub(d.aboveSince) >= d.interval() {
		d.overloaded = true
		d.since = d.aboveSince
	}
}

// MarkDrained records that the queue was empty at now.
func (d *detector) MarkDrained(now time.Time) {
	d.Advance(now, 0, false)
	d.drained = true
	d.aboveSince = time.Time{}
}

// Backlogged records that requests are waiting before they reach the queue
// (in the Go scheduler's run queue): an empty queue at the interval's end
// does not count as drained.
func (d *detector) Backlogged() { d.drained = false }

// record adds a sample to the current interval.
func (d *detector) record(wait time.Duration) {
	if !d.seen || wait < d.min {
		d.min = wait
		d.seen = true
	}
}

// Advance closes every interval that ended at or before now. queued reports
// whether requests are still waiting and headWait is how long the oldest of
// them has waited by now. It returns the overload state.
func (d *detector) Advance(now time.Time, headWait time.Duration, queued bool) bool {
	iv := d.interval()
	if d.start.IsZero() {
		d.start = now
		return d.overloaded
	}
	end := d.start.Add(iv)
	if now.Before(end) {
		return d.overloaded
	}
	if queued && (!d.seen || headWait < d.min) {
		d.min, d.seen = headWait, true
	}
	if queued {
		d.streak(now, headWait)
	}
	standing := d.seen && d.min > d.target()
	busy := d.seen || queued
	was := d.overloaded
	d.overloaded = standing || d.overloaded && busy && !d.drained
	if d.overloaded && !was {
		// The interval just closed had a standing queue throughout.
		d.since = d.start
	}
	d.seen, d.min, d.drained = false, 0, !queued
	// Skip the idle intervals since: they had no samples. If a queue is still
	// standing, its head keeps the sample alive for the current interval.
	n := now.Sub(d.start) / iv
	if n > 1 && !queued {
		d.overloaded = false
	}
	d.start = d.start.Add(n * iv)
	return d.overloaded
}

// Forgive clears the overload state and the current run of waits above
// Target: the standing queue was not the endpoint's (the stage's own limit
// held it, see limiter.SelfLimited). The next interval decides afresh.
func (d *detector) Forgive() {
	d.overloaded = false
	d.aboveSince = time.Time{}
}

// Since returns when the standing queue of the current overload began: the
// start of the interval, or of the run of waits above Target, that made it
// overloaded. Meaningless while not overloaded.
func (d *detector) Since() time.Time { return d.since }

// Dropped records an overload drop of this tier's queue at now.
func (d *detector) Dropped(now time.Time) { d.lastDrop = now }

// DroppedWithin reports whether this tier's queue had an overload drop in
// the last hold before now.
func (d *detector) DroppedWithin(now time.Time, hold time.Duration) bool {
	return !d.lastDrop.IsZero() && now.Sub(d.lastDrop) < hold
}

// Overloaded reports the state decided at the end of the last interval.
func (d *detector) Overloaded() bool { return d.overloaded }

// Drop reports whether a request that has waited wait should be dropped:
// the endpoint is overloaded and the wait exceeds 2 × Target.
func (d *detector) Drop(wait time.Duration) bool {
	return d.overloaded && wait > 2*d.target()
}

// NextEnd returns when the current interval ends (zero before the first call).
func (d *detector) NextEnd() time.Time {
	if d.start.IsZero() {
		return time.Time{}
	}
	return d.start.Add(d.interval())
}
