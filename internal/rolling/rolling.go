// Package rolling counts two quantities over a rolling window of fixed
// buckets, keeping running sums so that reading them is O(1) and counting
// allocates nothing. The breaker counts successes and failures with it, the
// throttle requests and accepts, the retry budget requests and retries.
//
// Time is an int64 of nanoseconds from an origin the owner chooses (its
// creation, usually): the window never reads a clock, so step tables drive
// it with explicit times.
//
// Contract: a time earlier than the newest bucket counts into the newest
// bucket (clocks of concurrent callers interleave); a jump of a whole span or
// more empties the window. Not safe for concurrent use: the owner holds its
// own lock.
package rolling

import "time"

// Pair is the two quantities of a bucket, or their sums over the window.
type Pair struct{ A, B int64 }

// Window is a rolling window of n buckets of width nanoseconds each.
type Window struct {
	width int64
	b     []Pair
	cur   int64 // bucket number (time / width) of the newest bucket
	next  int64 // the time the bucket after cur starts: (cur+1) × width
	sum   Pair
}

// New returns a window spanning span in buckets buckets (at least one). A
// bucket is at least a nanosecond wide.
func New(span time.Duration, buckets int) Window {
	buckets = max(buckets, 1)
	w := int64(span) / int64(buckets)
	if w <= 0 {
		w = 1
	}
	return Window{width: w, next: w, b: make([]Pair, buckets)}
}

// Advance moves the window to now, expiring the buckets that fell out of
// it. It reports whether now is in a newer bucket than before. The common
// case, now in the newest bucket, is inlined into the caller.
func (w *Window) Advance(now int64) bool {
	if now < w.next {
		return false
	}
	w.moveTo(now / w.width)
	return true
}

// moveTo makes bucket number e (> cur) the newest. It stays out of line so
// that Advance's fast path inlines.
//
//go:noinline
func (w *Window) moveTo(e int64) {
	n := int64(len(w.b))
	if e-w.cur >= n {
		clear(w.b)
		w.sum = Pair{}
	} else {
		for i := w.cur + 1; i <= e; i++ {
			p := &w.b[i%n]
			w.sum.A -= p.A
			w.sum.B -= p.B
			*p = Pair{}
		}
	}
	w.cur = e
	w.next = (e + 1) * w.width
}

// Add counts a and b into the newest bucket.
func (w *Window) Add(a, b int64) {
	p := &w.b[w.cur%int64(len(w.b))]
	p.A += a
	p.B += b
	w.sum.A += a
	w.sum.B += b
}

// Sum returns the totals over the window, as of the last Advance.
func (w *Window) Sum() Pair { return w.sum }

// Reset empties the window.
func (w *Window) Reset() {
	clear(w.b)
	w.sum = Pair{}
}

// Span returns the window's length: buckets × bucket width.
func (w *Window) Span() time.Duration { return time.Duration(w.width * int64(len(w.b))) }

// Buckets returns the number of buckets.
func (w *Window) Buckets() int { return len(w.b) }
