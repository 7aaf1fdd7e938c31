package shed

import (
	"math"
	"time"
)

// LimitConfig tunes the adaptive concurrency limit of an endpoint.
// The zero value works.
type LimitConfig struct {
	// Static, when > 0, fixes the limit and turns adaptation off. Default 0.
	Static int `yaml:"static" json:"static"`
	// Initial is the limit an endpoint starts with; default 4. Starting low
	// lets the limiter learn the unloaded latency before it grows.
	Initial int `yaml:"initial" json:"initial"`
	// Min is the floor of the adaptive limit; default 1 (a CPU-bound
	// handler on one processor is best served one at a time).
	Min int `yaml:"min" json:"min"`
	// Max is the ceiling of the adaptive limit; default 1000.
	Max int `yaml:"max" json:"max"`
	// Tolerance is how many times the baseline latency the mean service
	// time may reach before the limit shrinks; default 2.0.
	Tolerance float64 `yaml:"tolerance" json:"tolerance"`
	// MinSamples is the number of completed requests a window needs before
	// the limit moves; default 10. Quiet endpoints get longer windows.
	MinSamples int `yaml:"min_samples" json:"min_samples"`
}

func (c LimitConfig) withDefaults() LimitConfig {
	if c.Initial <= 0 {
		c.Initial = 4
	}
	if c.Min <= 0 {
		c.Min = 1
	}
	if c.Max <= 0 {
		c.Max = 1000
	}
	if c.Max < c.Min {
		c.Max = c.Min
	}
	c.Initial = min(max(c.Initial, c.Min), c.Max)
	if c.Tolerance <= 1 {
		c.Tolerance = 2
	}
	if c.MinSamples <= 0 {
		c.MinSamples = 10
	}
	return c
}

// window is what an endpoint measured since the limit last moved.
type window struct {
	// Count is the number of requests that completed, Sum their total
	// service time (handler start to handler return).
	Count int64
	Sum   time.Duration
	// MaxInflight is the most requests that ran at once.
	MaxInflight int64
	// Saturated reports that the processors were saturated at the window's
	// end (goroutines waiting for a processor, the process using at least
	// 90% of GOMAXPROCS): the CPU, not a dependency, makes requests slow.
	Saturated bool
	// Queued reports that requests waited in the stage's queue for a slot
	// during the window.
	Queued bool
	// Waiting is the number of requests in the stage's queue at the
	// window's end.
	Waiting int64
	// Span is how long the window lasted (0: unknown, one interval).
	Span time.Duration
}

// limiter is the adaptive concurrency limit of one endpoint: a gradient on
// the minimum service latency, with two safeguards. It is pure: the stage
// feeds it a window per measurement interval.
//
// Algorithm. The baseline is the lowest mean service time seen in a window
// (the latency at low concurrency). Each window with at least MinSamples
// completions compares its mean service time rtt with the baseline:
//
//   - rtt > Tolerance × baseline: the endpoint's own concurrency is making
//     requests slower (CPU or a saturated dependency). The limit is multiplied
//     by the gradient Tolerance × baseline / rtt, at most halved per window,
//     never below Min.
//   - else, if the limit was binding (MaxInflight ≥ 80% of it): grow by
//     √limit (by half right after a slow-dependency re-baseline, while the
//     latency stays within 20% of the new baseline), never above Max.
//   - else: unchanged.
//
// Safeguard against collapse under a slow dependency (Envoy's and Netflix's
// gradient limiters shrink to the minimum when a dependency slows down for
// every request, whatever the concurrency): if the limit has been cut to half
// of where the cutting started (or to Min) and the latency fell by less than
// 10%, the
// latency is not caused by this endpoint's concurrency; the baseline is reset
// to the current latency and the cuts are undone (not if a window of those
// cuts saw saturated processors: see below).
//
// Slow start: a limit that binds while requests queue and the latency stays
// flat (within 20% of the baseline) grows to what was asked of it (the
// requests in flight and queued), at least doubling and at most
// quadrupling per window, instead of growing by √limit: the queue is the
// limiter's own, not the endpoint's. Slow start ends with the first cut
// (latency rose with concurrency): after that the limit knows where the
// endpoint's capacity lies, and doubling back to it would oscillate. A fresh
// process behind a slow dependency starts at Initial and may need ten times
// that in flight at half of its capacity; growing by √limit it would queue,
// and be shed, for its first half second. SelfLimited reports such a window,
// so that the stage does not call the queue an overload.
//
// Saturated processors (window.Saturated): extra requests in flight only wait
// for a processor, so the limit does not grow, the tolerance is halfway to
// 1 (1.5 by default), and a cut that did not help is not taken for a slow
// dependency, also when the window that judges it looks unsaturated after
// saturated ones of the same run of cuts.
//
// Baseline probe: a baseline learned with several requests in flight on
// saturated processors holds their wait for a processor, and the gradient
// never cuts below the concurrency it was learned at (an endpoint that first
// sees traffic in a CPU spike, with limit Initial, keeps it: 4 CPU-bound
// handlers of 5 ms on one processor take 20 ms, and 20 ms becomes
// "unloaded"). So while saturated and binding, if the baseline's window had
// more requests in flight than half the limit, the limit is halved (not
// below probeFloor) for two windows, the first of which lets the requests
// started before the probe finish. If the second's latency is at most 80% of
// the latency before the probe, latency follows concurrency: the lower limit
// stays, the lower latency is the baseline, and the probe repeats from there.
// If not, the limit is restored and the baseline is not probed again (a
// dependency's latency does not follow our concurrency). The same probe
// runs periodically, without saturation, for a baseline learned while a
// dependency was congested: see probe.go.
//
// Safeguard against creeping up forever: the limit only grows while it is
// binding, so an idle or lightly used endpoint keeps its limit; the baseline
// only rises through the explicit reset above, never by drift (an average
// that follows the latency up lets the limit grow with it), and it falls back
// as soon as a window is faster.
type limiter struct {
	cfg      LimitConfig
	limit    float64
	baseline time.Duration

	cutFrom float64       // limit when the current run of cuts started; 0 when none
	cutRTT  time.Duration // latency then
	cutSat  bool          // a window of the current run of cuts saw saturated processors
	regrow  bool          // re-baselined: grow fast while latency stays flat
	self    bool          // the last window's queue was the limit's own (slow start)
	cut     bool          // the limit has been cut once: slow start is over

	baseConc    int64         // requests in flight in the window that set the baseline
	probeFrom   float64       // limit before the current baseline probe; 0 when none
	probeRTT    time.Duration // latency then
	probeSettle bool          // the probe's first windows, not measured
	probeAge    time.Duration // how long the probe has run
	probed      bool          // a saturated probe found the baseline sound: no more of those
	periodic    bool          // the running probe is a periodic one (see probe.go)
	windows     int64         // windows used so far
	nextProbe   int64         // windows at which a periodic probe may start; 0: not scheduled yet
	probeGap    int64         // windows between periodic probes; doubles while they find nothing
	rng         uint64        // jitter state (xorshift), seeded per endpoint
}

// newLimiter returns a limiter at cfg's initial (or static) limit.
func newLimiter(cfg LimitConfig) *limiter {
	l := &limiter{}
	l.SetConfig(cfg)
	return l
}

// SetConfig changes the configuration, keeping the learned state; the limit
// is clamped into the new bounds.
func (l *limiter) SetConfig(cfg LimitConfig) {
	first := l.limit == 0
	l.cfg = cfg.withDefaults()
	if first {
		l.limit = float64(l.cfg.Initial)
	}
	l.limit = math.Min(math.Max(l.limit, float64(l.cfg.Min)), float64(l.cfg.Max))
}

// Limit returns the current concurrency limit.
func (l *limiter) Limit() int {
	if l.cfg.Static > 0 {
		return l.cfg.Static
	}
	return int(l.limit)
}

// SelfLimited reports whether the last window used was a slow-start one:
// requests queued behind a binding limit while the latency stayed flat, and
// the limit grew. Such a queue is no overload of the endpoint.
func (l *limiter) SelfLimited() bool { return l.self }

// Baseline returns the latency the limiter considers unloaded (0 before the
// first full window).
func (l *limiter) Baseline() time.Duration { return l.baseline }

// probeFloor is the lowest limit a baseline probe tries. Below two, the
// probe would measure the run-queue yield, not concurrency: with one
// request in flight its slot idles while the request waits for the
// processor to poll the network (see runq.Yield), and on the one-processor
// bench a CPU-bound endpoint held at one served less, later, than at two
// (6× p99 106-125 ms against 58-74, 1.25× goodput 0.75-0.88).
const probeFloor = 2

// Update feeds one window. It reports whether the window was used; an
// unused window (too few samples) should keep accumulating.
func (l *limiter) Update(w window) (used bool) {
	if w.Count < int64(l.cfg.MinSamples) {
		return false
	}
	l.self = false
	rtt := w.Sum / time.Duration(w.Count)
	if l.baseline == 0 || rtt < l.baseline {
		l.baseline, l.baseConc = rtt, w.MaxInflight
	}
	if l.cfg.Static > 0 {
		return true
	}
	tol := l.cfg.Tolerance
	if w.Saturated {
		// Requests beyond what the processors run at once only wait for
		// a processor: tolerate less queueing behind the handler.
		tol = 1 + (tol-1)/2
	}
	l.windows++
	if l.probeWindow(w, rtt) || l.startProbe(w, rtt, tol) {
		return true
	}
	switch {
	case float64(rtt) > tol*float64(l.baseline):
		l.regrow = false
		if l.cutFrom == 0 {
			l.cutFrom, l.cutRTT, l.cutSat = l.limit, rtt, false
		} else if !w.Saturated && !l.cutSat && (l.limit <= l.cutFrom/2 || l.limit <= float64(l.cfg.Min)) && float64(rtt) >= 0.9*float64(l.cutRTT) {
			// Cutting concurrency in half did not bring latency down: the
			// slowness is not ours. Re-baseline instead of collapsing, and
			// undo the cuts. Not when the processors were saturated
			// during the cuts, even if they do not look it now: the
			// probe's reading flickers at a limit of 1-2, when few
			// goroutines are runnable, and the window after a cut still
			// holds the requests started before it, at the old
			// concurrency's latency. (A CPU-bound endpoint
			// re-baselined on such a window to 3× its latency, and its
			// limit grew to 31 on one processor.)
			l.baseline, l.baseConc = rtt, w.MaxInflight
			l.rebaselined()
			l.limit = math.Max(l.limit, l.cutFrom)
			l.cutFrom = 0
			l.regrow = true
			return true
		}
		l.cut = true
		l.cutSat = l.cutSat || w.Saturated
		g := math.Max(0.5, tol*float64(l.baseline)/float64(rtt))
		l.limit = math.Max(float64(l.cfg.Min), l.limit*g)
	case w.Saturated:
		// The processors are saturated: more requests in flight would
		// only wait for a processor. Hold.
		l.cutFrom = 0
		l.regrow = false
	case float64(w.MaxInflight) >= 0.8*l.limit:
		l.cutFrom = 0
		step := math.Max(1, math.Sqrt(l.limit))
		flat := float64(rtt) <= 1.2*float64(l.baseline)
		if !l.cut && w.Queued && flat && l.limit < float64(l.cfg.Max) {
			// Slow start: requests wait for the limit, not for the
			// endpoint, whose latency more of them in flight did not
			// change. Make room for the queue, at least doubling
			// and at most quadrupling the limit.
			step = math.Max(step, math.Min(3*l.limit, float64(w.MaxInflight+w.Waiting)-l.limit))
			step = math.Max(step, l.limit)
			l.self = true
		}
		if l.regrow && flat {
			// After a re-baseline the dependency is slower for everyone
			// and needs more requests in flight for the same throughput
			// (Little's law): grow by half while latency stays flat.
			step = math.Max(step, l.limit/2)
		} else {
			l.regrow = false
		}
		l.limit = math.Min(float64(l.cfg.Max), l.limit+step)
	default:
		l.cutFrom = 0
		l.regrow = false
	}
	return true
}
