package gateway

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/outcome"
)

// backend is one upstream server's live state. It outlives config
// snapshots: a reload that keeps a cluster's backend address keeps its
// state (outstanding requests, ejections, health).
type backend struct {
	cluster string
	addr    string

	outstanding atomic.Int64
	drained     atomic.Bool // admin drain: no new requests
	down        atomic.Bool // active health check says down
	// ejectedUntil is the end of the current ejection (unix nanos), 0 if
	// none; usableSince is when it last became usable (for slow start).
	ejectedUntil atomic.Int64
	usableSince  atomic.Int64
	// busySince is when outstanding last rose from 0, lastDone when an
	// attempt last got an answer (or a prompt error) from it (unix nanos):
	// together they tell a frozen backend (see stalled).
	busySince atomic.Int64
	lastDone  atomic.Int64
	// stalledAt is when b was last found stalled (unix nanos), 0 if it
	// is not: the stall holds until b answers (an attempt or a passed
	// health check) or stallHold passes, not only while requests are
	// outstanding (see stalled).
	stalledAt atomic.Int64
	// checkedOK is when a health check last passed (unix nanos).
	checkedOK atomic.Int64

	// attempts counts attempts by outcome.Kind (pre-resolved series).
	attempts []prometheus.Counter

	mu      sync.Mutex
	outlier outlierState
	check   checkState
}

func newBackend(cluster, addr string, now time.Time) *backend {
	b := &backend{cluster: cluster, addr: addr}
	b.usableSince.Store(now.UnixNano())
	return b
}

// usable reports whether b may take new requests at now, health aside when
// ignoreHealth (panic mode).
func (b *backend) usable(now int64, ignoreHealth bool) bool {
	if b.drained.Load() {
		return false
	}
	if ignoreHealth {
		return true
	}
	return !b.down.Load() && b.ejectedUntil.Load() <= now
}

// stallHold bounds how long a stalled backend stays stalled without an
// answer, when its cluster has no health checks to end it (then one more
// round of requests finds out); stallHoldChecked when it has: a passed
// check ends the stall and failed ones mark the backend down (fall ×
// (unhealthy_interval + timeout): about 4 s at the defaults), so the hold
// is only a safety net. A frozen cluster let in again at 5 s, while its
// checks were still falling, trapped 3-4 more POSTs in the chaos harness.
const (
	stallHold        = 5 * time.Second
	stallHoldChecked = 30 * time.Second
)

// stalled reports whether b has had requests outstanding and answered
// none for longer than after (0: never stalled), and once it has, until it
// answers an attempt, a health check passes with nothing outstanding (a
// check that passes while requests still wait unanswered, a stuck
// application behind a health endpoint that works, does not end it), or
// hold passes. Without the hold a frozen backend was
// stalled only while requests waited on it: when they had timed out or
// their clients had left it took new ones again, and the POSTs among them
// were trapped once more (the chaos harness's stop scenario lost requests
// each client timeout, 2 s, after the first stall).
func (b *backend) stalled(now int64, after, hold time.Duration) bool {
	if after <= 0 {
		return false
	}
	if at := b.stalledAt.Load(); at != 0 {
		checked := b.checkedOK.Load() > at && b.outstanding.Load() <= 0
		if b.lastDone.Load() <= at && !checked && now-at < int64(hold) {
			return true
		}
		b.stalledAt.CompareAndSwap(at, 0)
	}
	if b.outstanding.Load() <= 0 || now-max(b.lastDone.Load(), b.busySince.Load()) <= int64(after) {
		return false
	}
	b.stalledAt.CompareAndSwap(0, now)
	return true
}

// slowStartFactor is the share of its weight b gets at now: rising
// linearly from 10% to 100% over ramp after it became usable.
func (b *backend) slowStartFactor(now int64, ramp time.Duration) float64 {
	if ramp <= 0 {
		return 1
	}
	since := max(b.usableSince.Load(), b.ejectedUntil.Load())
	age := time.Duration(now - since)
	if age >= ramp || age < 0 {
		return 1
	}
	return 0.1 + 0.9*float64(age)/float64(ramp)
}

// observe records the outcome of one attempt for passive outlier
// detection. It returns the ejection decided, if any.
func (b *backend) observe(now time.Time, o outcome.Outcome, cfg *Outlier, mayEject func() bool) (ejectedFor time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ejectedUntil.Load() > now.UnixNano() {
		return 0
	}
	d := b.outlier.record(now, failure(o), cfg)
	if d == 0 || !mayEject() {
		if d != 0 {
			b.outlier.reset()
		}
		return 0
	}
	b.ejectedUntil.Store(now.Add(d).UnixNano())
	b.check.failedInEjection = false
	return d
}

// failure says whether o counts against a backend: a network error or a
// 5xx answer. A 503 or 429 from an overloaded backend counts too: an
// overloaded backend is one to relieve.
func failure(o outcome.Outcome) bool {
	if o.OK() {
		return false
	}
	if o.Kind == outcome.ClientCanceled {
		return false
	}
	return o.Kind.Network() || o.Status >= 500
}

// setCheck applies an active check's result. changed reports a move
// between up and down; readmitted an ejection ended early: checks failed
// while the backend was ejected (it was sick, not only the requests sent
// to it), then Rise passed in a row, so it takes traffic again without
// waiting out the ejection. A backend that passes its checks while it
// fails requests is never readmitted early.
func (b *backend) setCheck(now time.Time, ok bool, rise, fall int) (changed, readmitted bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ejected := b.ejectedUntil.Load() > now.UnixNano()
	if ejected && !ok {
		b.check.failedInEjection = true
	}
	wasDown := b.down.Load()
	down := b.check.observe(ok, rise, fall, wasDown)
	if ejected && !down && b.check.failedInEjection && b.check.ok >= rise {
		b.ejectedUntil.Store(0)
		b.check.failedInEjection = false
		b.usableSince.Store(now.UnixNano())
		readmitted = true
	}
	if down == wasDown {
		return false, readmitted
	}
	b.down.Store(down)
	if !down {
		b.usableSince.Store(now.UnixNano())
	}
	return true, readmitted
}

// checkState counts consecutive active-check results (rise/fall).
type checkState struct {
	ok, fail         int
	failedInEjection bool // a check failed during the current ejection
}

// observe returns the new down state after one check result.
func (c *checkState) observe(ok bool, rise, fall int, down bool) bool {
	if ok {
		c.ok++
		c.fail = 0
		if down && c.ok >= rise {
			return false
		}
		return down
	}
	c.fail++
	c.ok = 0
	if !down && c.fail >= fall {
		return true
	}
	return down
}

// outlierState is the passive detector of one backend: consecutive
// failures, and failures over a 10 s window of at least MinRequests.
type outlierState struct {
	consecutive   int
	windowStart   time.Time
	total, failed int
	ejections     int
}

const outlierWindow = 10 * time.Second

// record counts one attempt and returns the ejection time due, 0 if none:
// BaseEjection × n capped at MaxEjection, n the number of ejections so far
// including this one.
func (s *outlierState) record(now time.Time, failed bool, cfg *Outlier) time.Duration {
	if now.Sub(s.windowStart) >= outlierWindow {
		s.windowStart, s.total, s.failed = now, 0, 0
	}
	s.total++
	if failed {
		s.failed++
		s.consecutive++
	} else {
		s.consecutive = 0
		// a backend that has been fine for a whole window earns back
		// its ejection count slowly: one per clean window
	}
	eject := s.consecutive >= cfg.ConsecutiveErrors ||
		(s.total >= cfg.MinRequests && float64(s.failed) >= cfg.FailureRatio*float64(s.total) && failed)
	if !eject {
		return 0
	}
	s.ejections++
	s.consecutive, s.total, s.failed = 0, 0, 0
	s.windowStart = now
	d := cfg.BaseEjection * time.Duration(s.ejections)
	if d > cfg.MaxEjection {
		d = cfg.MaxEjection
	}
	return d
}

// reset forgets the failures that would have ejected when the cluster's
// ejection cap refused it, and the ejection count it did not use.
func (s *outlierState) reset() {
	s.ejections--
	s.consecutive, s.total, s.failed = 0, 0, 0
}
