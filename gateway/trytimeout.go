package gateway

import (
	"math"
	"sync/atomic"
	"time"
)

// The per-try timeout a route derives from what it observes when its
// try_timeout is not set (see Route.TryTimeout).
const (
	// AutoTryFactor × the p99 of the route's recent attempts.
	AutoTryFactor = 8
	// MinAutoTryTimeout is the floor of the derived timeout: below it, a
	// scheduling hiccup of a busy machine would pass for a dead backend.
	MinAutoTryTimeout = 100 * time.Millisecond
	// ColdTryTimeout is used until the route has seen autoMinSamples
	// attempts.
	ColdTryTimeout = time.Second
	autoMinSamples = 100
	// latWindow: the quantile covers the last one to two windows.
	latWindow = 10 * time.Second
	// latRefresh: how often the derived timeout is recomputed.
	latRefresh = 100 * time.Millisecond
	// StallFactor × the p99, at least MinStall: a backend with requests
	// outstanding that has answered none for that long looks frozen
	// (connects succeed, nothing answers), and its cluster takes no new
	// requests while every usable backend of it looks so.
	StallFactor = 2
	MinStall    = 50 * time.Millisecond
)

// latency buckets: bucket i holds durations in [latBase·2^(i/4),
// latBase·2^((i+1)/4)); the last one everything above.
const (
	latBase    = 50 * time.Microsecond
	latBuckets = 80 // up to latBase·2^20 ≈ 52 s
)

// latencyTracker keeps a route's recent attempt latencies (to response
// headers; a timed-out attempt counts as its timeout, so that a route that
// slows down as a whole raises its own timeout) in two rotating windows,
// and derives the per-try timeout from their p99. Safe for concurrent use;
// Observe and TryTimeout take no lock and do not allocate.
type latencyTracker struct {
	win     [2]latWindowCounts
	derived atomic.Int64 // the current derived timeout, nanoseconds
	stall   atomic.Int64 // the current stall threshold, nanoseconds; 0: none yet
	nextAt  atomic.Int64 // unix nanos of the next recomputation
}

type latWindowCounts struct {
	epoch   atomic.Int64 // now / latWindow when these counts began
	buckets [latBuckets]atomic.Uint32
}

func newLatencyTracker() *latencyTracker {
	l := &latencyTracker{}
	l.derived.Store(int64(ColdTryTimeout))
	return l
}

func latBucket(d time.Duration) int {
	if d <= latBase {
		return 0
	}
	i := int(4 * math.Log2(float64(d)/float64(latBase)))
	return min(i, latBuckets-1)
}

// upper is the upper bound of bucket i.
func latUpper(i int) time.Duration {
	return time.Duration(float64(latBase) * math.Exp2(float64(i+1)/4))
}

// window returns the counts for now's window, resetting it when it last
// served an older one.
func (l *latencyTracker) window(now int64) *latWindowCounts {
	e := now / int64(latWindow)
	w := &l.win[e&1]
	if old := w.epoch.Load(); old != e && w.epoch.CompareAndSwap(old, e) {
		for i := range w.buckets {
			w.buckets[i].Store(0)
		}
	}
	return w
}

// Observe records one attempt's latency at now.
func (l *latencyTracker) Observe(now time.Time, d time.Duration) {
	l.window(now.UnixNano()).buckets[latBucket(d)].Add(1)
}

// TryTimeout returns the derived per-try timeout at now, at most ceiling.
func (l *latencyTracker) TryTimeout(now time.Time, ceiling time.Duration) time.Duration {
	n := now.UnixNano()
	l.refresh(n)
	return min(time.Duration(l.derived.Load()), ceiling)
}

// StallAfter returns the stall threshold at now (see StallFactor); 0 until
// the route has seen enough attempts to know its latency.
func (l *latencyTracker) StallAfter(now int64) time.Duration {
	l.refresh(now)
	return time.Duration(l.stall.Load())
}

func (l *latencyTracker) refresh(n int64) {
	if next := l.nextAt.Load(); n >= next && l.nextAt.CompareAndSwap(next, n+int64(latRefresh)) {
		p99, ok := l.p99(n)
		if !ok {
			l.derived.Store(int64(ColdTryTimeout))
			l.stall.Store(0)
			return
		}
		l.derived.Store(int64(max(MinAutoTryTimeout, AutoTryFactor*p99)))
		l.stall.Store(int64(max(MinStall, StallFactor*p99)))
	}
}

// p99 is the p99 (a bucket's upper bound) of the current and the previous
// window; false with fewer than autoMinSamples attempts.
func (l *latencyTracker) p99(now int64) (time.Duration, bool) {
	e := now / int64(latWindow)
	var counts [latBuckets]uint64
	var total uint64
	for i := range l.win {
		w := &l.win[i]
		if ep := w.epoch.Load(); ep != e && ep != e-1 {
			continue
		}
		for j := range w.buckets {
			c := uint64(w.buckets[j].Load())
			counts[j] += c
			total += c
		}
	}
	if total < autoMinSamples {
		return 0, false
	}
	rank := total - total/100 // the p99: the bucket holding this rank
	var seen uint64
	for j, c := range counts {
		seen += c
		if seen >= rank {
			return latUpper(j), true
		}
	}
	return latUpper(latBuckets - 1), true
}
