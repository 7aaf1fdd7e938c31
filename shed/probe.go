package shed

import (
	"hash/fnv"
	"math"
	"time"
)

// Baseline probes: halving the limit for two windows to see whether the
// baseline latency holds a queue of the endpoint's own making.
//
// The gradient never cuts below the concurrency its baseline was learned
// at, so a baseline learned with a queue behind it keeps that queue. Two
// ways to learn one:
//
//   - saturated processors (limiter.go): an endpoint that first sees
//     traffic in a CPU spike learns its baseline with Initial requests
//     sharing a processor. Probed once, as soon as the processors are
//     saturated and the limit binds.
//   - a congested dependency (issue 5's follow-up; the periodic probe here):
//     an endpoint that starts while a dependency is slow for everyone learns
//     a slow baseline, and when that dependency recovers while our own load
//     exceeds what it serves, our requests beyond its capacity queue in it:
//     latency is then our own concurrency, it stays within tolerance of the
//     inflated baseline, and the slow-dependency safeguard (cuts that do not
//     bring latency down at once) even re-baselines higher.
//     TestModelMinRTTProbe: 20 slots × 20 ms, 80 ms of congestion for the
//     first second, then 1200 req/s: 250-320 ms per request for good without
//     the probe.
//
// Like Envoy's gradient controller (which pins concurrency low every
// min_rtt_calc_interval to re-measure the minimum RTT) and unlike it, the
// periodic probe is bounded so that it does not cost goodput at steady
// state:
//
//   - it runs only when the baseline looks inflated: it was learned with
//     more than 2 × probeFloor requests in flight (a baseline learned at a
//     few, like every fresh endpoint's at Initial, cannot hold much of a
//     queue of ours, and halving below probeFloor measures nothing), the
//     limit binds, and the latency is within tolerance (else the gradient
//     is already cutting);
//   - it runs no sooner than probeEvery windows after the limiter's first
//     window (slow start, which learns its baseline at Initial and then
//     grows the limit, never looks inflated), then with a gap
//     that doubles after every probe that finds the baseline sound, up to
//     probeMaxGap windows, jittered by up to half the gap per endpoint so
//     that the endpoints of a process do not probe together;
//   - a probe that finds latency following concurrency down (at most 80% of
//     before at half the limit) keeps the lower limit and baseline and
//     probes again from there at once, until latency stops falling; a
//     re-baseline (the slow-dependency safeguard) resets the gap.
//
// Cost: while it runs (two windows) the limit is halved. At a steady state
// whose baseline looks inflated but is sound (a dependency whose latency
// does not follow our concurrency), that is two windows in probeEvery (3 s
// at the default interval with min_samples met), then in 60, 120, ... up
// to 5 minutes: at most 1/15 of the time at half concurrency at first,
// then about 0.07%.

// probeEvery is the number of windows before the first periodic probe
// and the smallest gap between two.
const probeEvery = 30

// probeMaxGap is the largest gap between two periodic probes, in windows.
const probeMaxGap = 3000

// seed sets the jitter's state from the endpoint's name.
func (l *limiter) seed(name string) {
	h := fnv.New64a()
	h.Write([]byte(name))
	l.rng = h.Sum64() | 1
}

// jittered returns gap plus up to half of it, at random.
func (l *limiter) jittered(gap int64) int64 {
	if l.rng == 0 {
		l.rng = 0x9e3779b97f4a7c15
	}
	l.rng ^= l.rng << 13
	l.rng ^= l.rng >> 7
	l.rng ^= l.rng << 17
	return gap + int64(l.rng%uint64(gap/2+1))
}

// rebaselined notes a new baseline from the slow-dependency safeguard: its
// soundness is unknown, so the periodic probe's gap starts again from its
// smallest.
func (l *limiter) rebaselined() {
	l.probeGap = probeEvery
	l.nextProbe = min(l.nextProbe, l.windows+l.jittered(probeEvery))
}

// probeWindow handles a window while a probe runs and reports whether it
// did (the window is then used for nothing else).
func (l *limiter) probeWindow(w window, rtt time.Duration) bool {
	if l.probeFrom == 0 {
		return false
	}
	if w.Span > 0 {
		l.probeAge += w.Span
	} else {
		l.probeAge += DefaultInterval
	}
	if l.probeSettle || l.probeAge < 2*l.probeRTT {
		// Requests of this window started before the probe (their
		// latency was about probeRTT, and those queued behind them in
		// a dependency take as long again): a later window measures it.
		l.probeSettle = false
		return true
	}
	if float64(rtt) > 0.8*float64(l.probeRTT) {
		// Latency did not follow concurrency down: the baseline was not
		// inflated by it. Back to the limit.
		l.limit = math.Max(l.limit, l.probeFrom)
		if l.periodic {
			l.probeGap = min(2*l.probeGap, probeMaxGap)
			l.nextProbe = l.windows + l.jittered(l.probeGap)
		} else {
			l.probed = true // for good
		}
	} else {
		l.cut = true // the lower baseline was learned above
		if l.periodic {
			l.nextProbe = l.windows // and again from there
		}
	}
	l.probeFrom = 0
	return true
}

// startProbe starts a probe when one is due (see the top of this file) and
// reports whether it did.
func (l *limiter) startProbe(w window, rtt time.Duration, tol float64) bool {
	if l.probeGap == 0 {
		l.probeGap = probeEvery
		l.nextProbe = l.windows + l.jittered(probeEvery)
	}
	half := math.Floor(l.limit / 2)
	if half < math.Max(probeFloor, float64(l.cfg.Min)) || float64(w.MaxInflight) < 0.8*l.limit ||
		float64(rtt) > tol*float64(l.baseline) {
		return false // no room to halve, not binding, or the gradient is cutting
	}
	switch {
	case w.Saturated && !l.probed && l.baseConc > int64(half):
		l.periodic = false
	case !w.Saturated && l.baseConc > 2*probeFloor && l.windows >= l.nextProbe:
		l.periodic = true
	default:
		return false
	}
	l.probeFrom, l.probeRTT, l.probeSettle, l.probeAge = l.limit, rtt, true, 0
	l.limit = half
	return true
}
