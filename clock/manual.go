package clock

import (
	"sync"
	"time"
)

// Manual is a virtual clock for tests and discrete-event simulation. Time only
// moves when Advance, RunUntil or Step is called. Due timers fire in order of
// deadline, and timers due at the same instant fire in the order they were
// scheduled (or last Reset), so runs are deterministic.
//
// Callbacks of AfterFunc run synchronously on the goroutine that advances the
// clock, with Now() equal to their deadline; they may schedule, stop and reset
// timers. Channel timers and tickers deliver with a non-blocking send into a
// one-slot buffer, like the runtime's timers: a tick nobody reads is dropped.
//
// A Manual is safe for concurrent use, but only one goroutine should advance
// it at a time.
type Manual struct {
	mu   sync.Mutex
	base time.Time
	now  int64 // nanoseconds since base
	seq  uint64
	heap []*manualTimer
}

// NewManual returns a Manual clock whose time starts at start.
func NewManual(start time.Time) *Manual {
	return &Manual{base: start}
}

// Now returns the virtual time.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	n := m.now
	m.mu.Unlock()
	return m.base.Add(time.Duration(n))
}

// Since returns the virtual time elapsed since t.
func (m *Manual) Since(t time.Time) time.Duration { return m.Now().Sub(t) }

// AfterFunc schedules f to run when the clock has advanced by d.
func (m *Manual) AfterFunc(d time.Duration, f func()) Timer {
	t := &manualTimer{m: m, f: f, idx: -1}
	m.mu.Lock()
	m.schedule(t, d)
	m.mu.Unlock()
	return t
}

// NewTimer returns a timer that sends the virtual time on C() after d.
func (m *Manual) NewTimer(d time.Duration) Timer {
	t := &manualTimer{m: m, ch: make(chan time.Time, 1), idx: -1}
	m.mu.Lock()
	m.schedule(t, d)
	m.mu.Unlock()
	return t
}

// NewTicker returns a ticker that sends the virtual time on C() every d.
func (m *Manual) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("clock: non-positive interval for NewTicker")
	}
	t := &manualTimer{m: m, ch: make(chan time.Time, 1), idx: -1, period: d}
	m.mu.Lock()
	m.schedule(t, d)
	m.mu.Unlock()
	return manualTicker{t}
}

// Next returns the deadline of the earliest pending timer, and false if no
// timer is pending.
func (m *Manual) Next() (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.heap) == 0 {
		return time.Time{}, false
	}
	return m.base.Add(time.Duration(m.heap[0].when)), true
}

// Pending returns the number of timers waiting to fire.
func (m *Manual) Pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.heap)
}

// Advance moves the clock forward by d, firing every timer that falls due on
// the way, in order. Time is set to each timer's deadline while it fires and
// ends at now+d. A negative d is treated as zero.
func (m *Manual) Advance(d time.Duration) {
	if d < 0 {
		d = 0
	}
	m.mu.Lock()
	target := m.now + int64(d)
	m.mu.Unlock()
	m.runTo(target)
}

// RunUntil advances the clock to t, firing due timers. If t is not after the
// current time it fires only the timers already due.
func (m *Manual) RunUntil(t time.Time) {
	m.mu.Lock()
	target := int64(t.Sub(m.base))
	if target < m.now {
		target = m.now
	}
	m.mu.Unlock()
	m.runTo(target)
}

// Step advances the clock to the earliest pending timer and fires it alone.
// It reports false, leaving the time unchanged, when no timer is pending.
// Discrete-event loops call Step until it returns false or a horizon passes.
func (m *Manual) Step() bool {
	m.mu.Lock()
	if len(m.heap) == 0 {
		m.mu.Unlock()
		return false
	}
	t := m.popLocked()
	m.mu.Unlock()
	t.fire()
	return true
}

func (m *Manual) runTo(target int64) {
	for {
		m.mu.Lock()
		if len(m.heap) == 0 || m.heap[0].when > target {
			if target > m.now {
				m.now = target
			}
			m.mu.Unlock()
			return
		}
		t := m.popLocked()
		m.mu.Unlock()
		t.fire()
	}
}

// popLocked removes the earliest timer, moves time to its deadline and, for a
// ticker, schedules the next tick.
func (m *Manual) popLocked() *manualTimer {
	t := m.heap[0]
	m.remove(0)
	if t.when > m.now {
		m.now = t.when
	}
	if t.period > 0 {
		m.schedule(t, t.period)
	}
	return t
}

func (m *Manual) schedule(t *manualTimer, d time.Duration) {
	if d < 0 {
		d = 0
	}
	t.when = m.now + int64(d)
	m.seq++
	t.seq = m.seq
	if t.idx >= 0 {
		m.fix(t.idx)
		return
	}
	t.idx = len(m.heap)
	m.heap = append(m.heap, t)
	m.up(t.idx)
}

type manualTimer struct {
	m      *Manual
	when   int64
	seq    uint64
	idx    int // position in m.heap, -1 when not scheduled
	f      func()
	ch     chan time.Time
	period time.Duration
}

func (t *manualTimer) fire() {
	if t.f != nil {
		t.f()
		return
	}
	now := t.m.Now()
	select {
	case t.ch <- now:
	default:
	}
}

func (t *manualTimer) C() <-chan time.Time { return t.ch }

func (t *manualTimer) Stop() bool {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	if t.idx < 0 {
		return false
	}
	t.m.remove(t.idx)
	return true
}

func (t *manualTimer) Reset(d time.Duration) bool {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	active := t.idx >= 0
	if t.period > 0 {
		t.period = d
	}
	t.m.schedule(t, d)
	return active
}

type manualTicker struct{ t *manualTimer }

func (k manualTicker) C() <-chan time.Time { return k.t.ch }
func (k manualTicker) Stop()               { k.t.Stop() }
func (k manualTicker) Reset(d time.Duration) {
	if d <= 0 {
		panic("clock: non-positive interval for Ticker.Reset")
	}
	k.t.Reset(d)
}

// Heap of timers ordered by (when, seq); each timer knows its index.

func (m *Manual) less(i, j int) bool {
	a, b := m.heap[i], m.heap[j]
	if a.when != b.when {
		return a.when < b.when
	}
	return a.seq < b.seq
}

func (m *Manual) swap(i, j int) {
	h := m.heap
	h[i], h[j] = h[j], h[i]
	h[i].idx = i
	h[j].idx = j
}

func (m *Manual) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !m.less(i, p) {
			return
		}
		m.swap(i, p)
		i = p
	}
}

func (m *Manual) down(i int) bool {
	start, n := i, len(m.heap)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		c := l
		if r := l + 1; r < n && m.less(r, l) {
			c = r
		}
		if !m.less(c, i) {
			break
		}
		m.swap(i, c)
		i = c
	}
	return i > start
}

func (m *Manual) fix(i int) {
	if !m.down(i) {
		m.up(i)
	}
}

func (m *Manual) remove(i int) {
	last := len(m.heap) - 1
	t := m.heap[i]
	if i != last {
		m.swap(i, last)
	}
	m.heap[last] = nil
	m.heap = m.heap[:last]
	if i != last {
		m.fix(i)
	}
	t.idx = -1
}

var (
	_ Clock  = (*Manual)(nil)
	_ Timer  = (*manualTimer)(nil)
	_ Ticker = manualTicker{}
)
