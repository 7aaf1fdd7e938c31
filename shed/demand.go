package shed

import "github.com/veerhq/veer/tier"

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
// outnumber every request the stage admitted in that time: those tiers alone
// ask for more than the endpoint serves. Otherwise the endpoint served at
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
}

// demand is the ring of snapshots taken at the last interval ends. It is a
// pure value: the stage fills it under its lock.
type demand struct {
	ring [demandWindow + 1]demandSnap // the oldest is demandWindow intervals back
	next int                          // the slot the next push overwrites: the oldest
	n    int                          // slots filled
}

// push records the snapshot taken at an interval's end.
func (d *demand) push(s demandSnap) {
	d.ring[d.next] = s
	d.next = (d.next + 1) % len(d.ring)
	d.n = min(d.n+1, len(d.ring))
}

// excess reports whether the requests of tier t and above that arrived
// since the oldest snapshot outnumber the admissions of every tier in that
// time (now is the current cumulative snapshot). Before the first snapshot
// it counts from the stage's start.
func (d *demand) excess(now demandSnap, t tier.Tier) bool {
	var old demandSnap
	if d.n == len(d.ring) {
		old = d.ring[d.next]
	} else if d.n > 0 {
		old = d.ring[0]
	}
	var asked uint64
	for u := t; u <= tier.CriticalPlus; u++ {
		asked += now.arrived[u] - old.arrived[u]
	}
	return asked > now.admitted-old.admitted
}

// snapLocked (under mu) takes the stage's cumulative counts.
func (st *stage) snapLocked() demandSnap {
	var s demandSnap
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
