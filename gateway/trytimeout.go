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
	// EscalateShare: when more than this share of the route's recent
	// attempts timed out, the route as a whole is slower than its timeout
	// (not one frozen backend, which the stall detector and ejection empty
	// within a few attempts): the timeout doubles at every refresh until
	// answers come back in time.
	EscalateShare  = 0.1
	autoMinSamples = 100
	// latWindow: the quantile covers the last one to two windows.
	latWindow = 10 * time.Second
	// latRefresh: how often the derived timeout is recomputed.
	latRefresh = 100 * time.Millisecond
	// maxEscalated bounds the doubling (the route's timeout bounds it
	// first in practice).
	maxEscalated = time.Hour
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
// headers) and timed-out attempts in two rotating windows, and derives the
// per-try timeout from the p99 of the answered ones, doubling it while
// more than EscalateShare of the attempts time out (a route that slows down
// as a whole raises its own timeout instead of timing everything out).
// Timed-out attempts are not latencies: counted as such, a frozen backend's
// few timeouts would raise the p99 to the timeout and the timeout 8×, and
// the next requests would wait that much longer on the frozen backend.
// Safe for concurrent use; Observe and TryTimeout take no lock and do not
// allocate.
type latencyTracker struct {
	win     [2]latWindowCounts
	derived atomic.Int64 // the current derived timeout, nanoseconds
	stall   atomic.Int64 // the current stall threshold, nanoseconds; 0: none yet
	nextAt  atomic.Int64 // unix nanos of the next recomputation
}

type latWindowCounts struct {
	epoch    atomic.Int64 // now / latWindow when these counts began
	buckets  [latBuckets]atomic.Uint32
	timeouts atomic.Uint32
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
		w.timeouts.Store(0)
	}
	return w
}

// Observe records one answered attempt's latency at now.
func (l *latencyTracker) Observe(now time.Time, d time.Duration) {
	l.window(now.UnixNano()).buckets[latBucket(d)].Add(1)
}

// ObserveTimeout records one attempt that timed out at now.
func (l *latencyTracker) ObserveTimeout(now time.Time) {
	l.window(now.UnixNano()).timeouts.Add(1)
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
		p99, timedOut, ok := l.p99(n)
		switch {
		case timedOut:
			l.derived.Store(min(2*l.derived.Load(), int64(maxEscalated)))
		case !ok:
			l.derived.Store(int64(ColdTryTimeout))
		default:
			l.derived.Store(int64(max(MinAutoTryTimeout, AutoTryFactor*p99)))
		}
		if !ok {
			l.stall.Store(0)
			return
		}
		l.stall.Store(int64(max(MinStall, StallFactor*p99)))
	}
}

// p99 is the p99 (a bucket's upper bound) of the answered attempts of the
// current and the previous window, ok with at least autoMinSamples of
// them; timedOut reports that more than EscalateShare of all attempts
// (at least autoMinSamples) timed out.
func (l *latencyTracker) p99(now int64) (p99 time.Duration, timedOut, ok bool) {
	e := now / int64(latWindow)
	var counts [latBuckets]uint64
	var total, timeouts uint64
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
		timeouts += uint64(w.timeouts.Load())
	}
	all := total + timeouts
	timedOut = all >= autoMinSamples && float64(timeouts) > EscalateShare*float64(all)
	if total < autoMinSamples {
		return 0, timedOut, false
	}
	rank := total - total/100 // the p99: the bucket holding this rank
	var seen uint64
	for j, c := range counts {
		seen += c
		if seen >= rank {
			return latUpper(j), timedOut, true
		}
	}
	return latUpper(latBuckets - 1), timedOut, true
}
