package shed

import (
	"time"

	"github.com/veerhq/veer/tier"
)

// The demand gate: a tier is shed for overload only while it is part of the
// excess. CoDel, per tier queue, sees that a queue stands; it cannot see
// whether the load of that tier and the tiers above it fits in the capacity
// and the queue stood only for a moment (tiers arriving in runs, a burst, a
// core taken away briefly). Shedding such a tier drops more than the excess,
// and worse, raises the floor: every request of the tiers below is then
// refused for FloorHold while the processor idles (issue 18's over-shedding
// at 1.25×; the virtual-time model with tiers in runs fell to 0.73 of
// capacity with 41.6% shed where 20% was the excess).
//
// So a tier t above the lowest may be dropped for overload, and is served
// newest first, only while the requests of t and the tiers above it that
// arrived over the last demandWindow intervals (and this one so far)
// outnumber every request the stage admitted in that time, and in the
// demandWindow intervals before (see excess): those tiers alone ask for
// more than the endpoint serves. Otherwise the endpoint served at
// least their whole demand (it admitted as many, lower tiers included), and
// a standing queue of t drains by itself once the lower tiers are shed; t is
// served oldest first like a tier that is never shed. The lowest tier is
// never gated: it is where the excess goes first.
//
// Counting costs the request path nothing: the arrivals of a tier are its
// admissions (the wait histogram), refusals (per-tier counters the refusal
// path adds to) and live waiters, read at interval ends and when a gated
// decision is taken.

// demandWindow is the number of closed intervals the gate looks back over
// (with the default interval, 300 to 400 ms). Longer is steadier at a
// tier's demand near capacity (2×: the tiers above sheddable ask for 1.1×)
// but opens later after an overload starts, when the window still holds the
// calm before it; shorter lets a run of one tier longer than the window
// count as excess.
const demandWindow = 3

// demandSnap is a stage's cumulative request counts at one moment.
type demandSnap struct {
	arrived  [tier.CriticalPlus + 1]uint64 // admitted + refused + waiting, per tier
	admitted uint64
	at       time.Time // when it was taken
}

// demand is the ring of snapshots taken at the last interval ends. It is a
// pure value: the stage fills it under its lock.
type demand struct {
	ring [2*demandWindow + 1]demandSnap // the oldest is 2 × demandWindow intervals back
	next int                            // the slot the next push overwrites: the oldest
	n    int                            // slots filled
	// sat holds, for each of the last demandSatIntervals intervals, the stage's
	// admissions per second if the interval ended saturated (its queue
	// stood throughout), else 0; pi is the slot the next push overwrites.
	sat [demandSatIntervals]float64
	pi  int
	// shedSince is when the stage's current shedding spell began (its
	// tick saw it shedding since then without a break); zero while not.
	shedSince time.Time
}

// noteShedding records at an interval's end whether the stage is shedding.
func (d *demand) noteShedding(now time.Time, shedding bool) {
	switch {
	case !shedding:
		d.shedSince = time.Time{}
	case d.shedSince.IsZero():
		d.shedSince = now
	}
}

// demandSatIntervals is how many intervals (with the default interval, one second)
// the rate of a saturated interval counts as what the endpoint can admit
// (see excess). A second outlasts FloorHold's refusals after a stall: while
// the floor refuses the lowest tier the stage is seldom saturated, and its
// admissions show only what the tiers above asked.
const demandSatIntervals = 10

// push records the snapshot taken at an interval's end; saturated says
// whether the stage's queue stood through the interval.
func (d *demand) push(s demandSnap, saturated bool) {
	rate := 0.0
	if prev, ok := d.back(0); ok && saturated && s.at.After(prev.at) {
		rate = float64(s.admitted-prev.admitted) / s.at.Sub(prev.at).Seconds()
	}
	d.sat[d.pi] = rate
	d.pi = (d.pi + 1) % len(d.sat)
	d.ring[d.next] = s
	d.next = (d.next + 1) % len(d.ring)
	d.n = min(d.n+1, len(d.ring))
}

// excess reports whether the requests of tier t and above that arrived
// since the snapshot demandWindow intervals back outnumber the admissions
// of every tier in that time (now is the current cumulative snapshot), and
// the admissions of the demandWindow intervals before it as well. Before
// the first snapshot it counts from the stage's start.
//
// The window before: a processor taken away for a moment (another
// process, a stall of the machine) admits nobody for that moment while the
// requests keep arriving and wait, so over the window they outnumber the
// admissions although the endpoint serves their whole demand once it has
// the processor back. Near capacity the margin is thin (at 1.25× the
// tiers above sheddable ask for 0.69 of it, at 2× for 1.1), and in the
// virtual-time model a 60 ms stall at 1.25× made sheddable_plus excess by
// one request in 52: it was dropped, and the floor then refused every
// sheddable request for FloorHold while the processor idled (goodput 0.87
// with 30.8% shed, TestModelStallAtMildOverload). What the endpoint
// admitted in the window before shows that it can serve them; a real loss
// of capacity shows in both windows after demandWindow more intervals.
// The window before counts at 15/16: admissions vary by a few percent from
// one window to the next, and counted in full, a slightly busier window
// before kept sheddable_plus from being shed at 2× now and then (the
// model's dependency at 2×: p99 79.5-82.5 ms against 76-79 ms). It is
// scaled to the current window's length, which runs up to an interval
// longer (the open one so far): unscaled, 58 arrivals of 370 ms outnumbered
// the 57 admissions (at 15/16) of 300 ms after a stall at 1.25×
// (TestDemandScaledWindow).
//
// The saturated rate: while the floor refuses the lowest tier, the stage
// admits only what the tiers above ask, so the window before shows their
// demand, not what the endpoint can serve, and after the next stall the
// requests it held back, arriving together, make the tier excess again: the
// floor never comes down (TestModelPeriodicStalls: 0.66-0.87 of capacity
// where the stalls leave 0.85-0.90). So a tier is not excess either while
// its demand over the last two windows fits in the mean admission rate of
// the saturated intervals of the last second (satRate), at 15/16. Two
// windows, because a 150 ms stall's held-back requests outnumber what one
// window admits. Only over the part of them since the stage began its
// current shedding spell, and at least one window of it (shedWindow): at
// the onset of an overload the calm before it hides the excess (counted
// over two windows from the onset, the model's 2× p99 was 105-147 ms
// instead of 74-80), and waiting for two whole windows of shedding left
// stalls early in an overload to over-shed (TestModelEarlyStalls).
func (d *demand) excess(now demandSnap, t tier.Tier) bool {
	old, ok := d.back(demandWindow)
	asked := askedSince(now, old, t)
	served := now.admitted - old.admitted
	if older, ok2 := d.back(2 * demandWindow); ok && ok2 {
		prev := scaled(old.admitted-older.admitted, now.at.Sub(old.at), old.at.Sub(older.at))
		served = max(served, prev-prev/16)
	}
	if asked <= served {
		return false
	}
	// What a saturated interval admitted lately, over two windows: the
	// requests a stall held back arrive at the stage together after it,
	// and over one window they can outnumber what the endpoint admits in
	// it, although it serves them within the next.
	if long, ok2 := d.shedWindow(); ok2 {
		c := uint64(d.satRate() * now.at.Sub(long.at).Seconds())
		if askedSince(now, long, t) <= c-c/16 {
			return false
		}
	}
	return true
}

// shedWindow returns the oldest snapshot, at most two windows back and at
// least one, taken since the stage began its current shedding spell; false
// when there is none.
func (d *demand) shedWindow() (demandSnap, bool) {
	if d.shedSince.IsZero() {
		return demandSnap{}, false
	}
	for k := 2 * demandWindow; k >= demandWindow; k-- {
		if s, ok := d.back(k); ok && !s.at.Before(d.shedSince) {
			return s, true
		}
	}
	return demandSnap{}, false
}

// satRate is the mean admission rate of the saturated intervals among the
// last demandSatIntervals (0: none). The mean, not the highest: one interval's
// admissions vary (a slot freed just after its end, the limit moved), and
// the highest of ten read up to 1.09 of the capacity in the model, enough
// at 2× (the tiers above sheddable ask for 1.1) to keep sheddable_plus
// from being shed now and then (p99 105-147 ms against 74-80).
func (d *demand) satRate() float64 {
	var sum float64
	n := 0
	for _, r := range d.sat {
		if r > 0 {
			sum += r
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// askedSince is the requests of tier t and above that arrived between old
// and now.
func askedSince(now, old demandSnap, t tier.Tier) uint64 {
	var n uint64
	for u := t; u <= tier.CriticalPlus; u++ {
		n += now.arrived[u] - old.arrived[u]
	}
	return n
}

// scaled is n counted over span, counted over cur instead: the window
// before is demandWindow closed intervals, the current one those and the
// open interval so far (up to one interval more). Compared unscaled, the
// arrivals of up to 4 intervals outnumbered the admissions of 3 after a
// stall at 1.25× (58 asked against 57 served 70 ms into the open interval,
// TestDemandScaledWindow), and sheddable_plus was dropped.
func scaled(n uint64, cur, span time.Duration) uint64 {
	if span <= 0 || cur <= 0 {
		return n
	}
	return uint64(float64(n) * float64(cur) / float64(span))
}

// back returns the snapshot k intervals back, or the oldest one (the
// stage's start: zero counts, before the first) and false when there are
// fewer than k.
func (d *demand) back(k int) (demandSnap, bool) {
	if d.n <= k {
		if d.n > 0 {
			return d.ring[0], false
		}
		return demandSnap{}, false
	}
	return d.ring[(d.next-k+len(d.ring)-1)%len(d.ring)], true
}

// snapLocked (under mu) takes the stage's cumulative counts.
func (st *stage) snapLocked() demandSnap {
	s := demandSnap{at: st.s.clk.Now()}
	for _, t := range tier.All {
		a := st.m.wait[t].count()
		s.admitted += a
		s.arrived[t] = a + uint64(st.refused[t].Load()) + uint64(st.q[t].live)
	}
	return s
}

// mayShedLocked (under mu) reports whether tier t may be dropped for
// overload and served newest first: it is sheddable, and it is the lowest
// tier or part of the excess (see demand).
func (st *stage) mayShedLocked(t tier.Tier, p *policy) bool {
	if !p.sheddable(t) {
		return false
	}
	if t == tier.Sheddable {
		return true
	}
	return st.dem.excess(st.snapLocked(), t)
}
