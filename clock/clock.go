// Package clock abstracts time so that the same policy code runs on the wall
// clock in production and on a virtual clock in tests and in the simulator.
//
// Contract: components take a Clock, never call time.Now or time.AfterFunc
// directly. Real is the wall clock. Manual is a virtual clock that only moves
// when its owner calls Advance, RunUntil or Step; timers fire synchronously,
// on the goroutine that advances the clock, in (deadline, creation) order, so
// a run is deterministic.
//
// Failure mode: code that blocks inside a Manual timer callback blocks the
// caller of Advance; callbacks must be short and must not wait for other
// goroutines.
package clock

import "time"

// Clock tells the time and schedules work.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// Since returns the time elapsed since t.
	Since(t time.Time) time.Duration
	// AfterFunc calls f once, after d, on its own goroutine (Real) or on the
	// goroutine advancing the clock (Manual).
	AfterFunc(d time.Duration, f func()) Timer
	// NewTimer returns a timer that sends the time on C() after d.
	NewTimer(d time.Duration) Timer
	// NewTicker returns a ticker that sends the time on C() every d.
	// It panics if d <= 0, like time.NewTicker.
	NewTicker(d time.Duration) Ticker
}

// Timer is a single-shot timer. For timers made by AfterFunc, C returns nil.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing. It reports whether the call
	// stopped the timer (false if it had already fired or been stopped).
	Stop() bool
	// Reset changes the timer to fire after d. It reports whether the timer
	// had been active.
	Reset(d time.Duration) bool
}

// Ticker delivers ticks at intervals.
type Ticker interface {
	C() <-chan time.Time
	Stop()
	Reset(d time.Duration)
}

// Real is the wall clock, backed by package time.
var Real Clock = realClock{}

type realClock struct{}

func (realClock) Now() time.Time                  { return time.Now() }
func (realClock) Since(t time.Time) time.Duration { return time.Since(t) }

func (realClock) AfterFunc(d time.Duration, f func()) Timer {
	return realTimer{t: time.AfterFunc(d, f)}
}

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{t: time.NewTimer(d)} }

func (realClock) NewTicker(d time.Duration) Ticker { return realTicker{t: time.NewTicker(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time   { return r.t.C }
func (r realTicker) Stop()                 { r.t.Stop() }
func (r realTicker) Reset(d time.Duration) { r.t.Reset(d) }

// Or returns c, or Real when c is nil. Constructors use it so that a zero
// Config field means the wall clock.
func Or(c Clock) Clock {
	if c == nil {
		return Real
	}
	return c
}

var (
	_ Clock  = realClock{}
	_ Timer  = realTimer{}
	_ Ticker = realTicker{}
)
