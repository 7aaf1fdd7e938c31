package shed

import (
	"testing"

	"github.com/veerhq/veer/tier"
)

// snapOf builds a cumulative snapshot: arrivals of sheddable, sheddable_plus
// and critical, and the admissions of every tier.
func snapOf(s, sp, c, admitted uint64) demandSnap {
	var d demandSnap
	d.arrived[tier.Sheddable], d.arrived[tier.SheddablePlus], d.arrived[tier.Critical] = s, sp, c
	d.admitted = admitted
	return d
}

// TestDemandExcess: a tier is part of the excess when it and the tiers
// above it asked for more, over the last demandWindow intervals, than the
// stage admitted in that time. Steps push interval-end snapshots (cumulative
// counts) and ask at a later moment.
func TestDemandExcess(t *testing.T) {
	type step struct {
		push []demandSnap
		now  demandSnap
		t    tier.Tier
		want bool
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"no snapshot yet: counted from the start", []step{
			{nil, snapOf(0, 30, 5, 20), tier.SheddablePlus, true},
			{nil, snapOf(40, 10, 5, 20), tier.SheddablePlus, false},
		}},
		{"1.25x, random tiers: the tiers above sheddable fit", []step{
			// 25 arrivals per interval (45% s, 45% s+, 10% c), 20 admitted.
			{[]demandSnap{snapOf(0, 0, 0, 0), snapOf(11, 11, 3, 20), snapOf(22, 22, 6, 40), snapOf(34, 34, 7, 60)}, snapOf(40, 40, 9, 70), tier.SheddablePlus, false},
			{nil, snapOf(40, 40, 9, 70), tier.Sheddable, true},
		}},
		{"a run of sheddable_plus after a run of sheddable: not excess", []step{
			// 300 ms: 37 sheddable, then 37 sheddable_plus and 8 critical
			// arrive; the stage admits 60 (20 per interval).
			{[]demandSnap{snapOf(0, 0, 0, 0), snapOf(25, 0, 0, 20), snapOf(37, 12, 0, 40), snapOf(37, 37, 0, 60)}, snapOf(37, 40, 8, 64), tier.SheddablePlus, false},
		}},
		{"the same run seen over too short a window (one interval): excess", []step{
			{[]demandSnap{snapOf(37, 12, 0, 40), snapOf(37, 37, 0, 60)}, snapOf(37, 40, 0, 64), tier.SheddablePlus, true},
		}},
		{"2x: sheddable_plus and critical ask for 1.1x", []step{
			{[]demandSnap{snapOf(0, 0, 0, 0), snapOf(18, 18, 4, 20), snapOf(36, 36, 8, 40), snapOf(54, 54, 12, 60)}, snapOf(54, 54, 12, 60), tier.SheddablePlus, true},
			{nil, snapOf(54, 54, 12, 60), tier.Critical, false},
		}},
		{"a stall: the window before admitted them all", []step{
			// 20 admitted per interval, then an interval in which the
			// processor was away for 60 ms (11 admitted): 52 of the
			// tiers above sheddable asked, 51 admitted, 60 the window
			// before (57 at 15/16).
			{[]demandSnap{snapOf(0, 0, 0, 0), snapOf(10, 10, 2, 20), snapOf(20, 20, 4, 40), snapOf(30, 30, 6, 60), snapOf(40, 44, 8, 80), snapOf(50, 60, 11, 91), snapOf(60, 70, 13, 105)}, snapOf(66, 74, 14, 111), tier.SheddablePlus, false},
		}},
		{"the capacity fell: both windows admitted fewer", []step{
			{[]demandSnap{snapOf(0, 0, 0, 0), snapOf(10, 10, 2, 17), snapOf(20, 20, 4, 34), snapOf(30, 30, 6, 51), snapOf(40, 44, 8, 68), snapOf(50, 60, 11, 85), snapOf(60, 70, 13, 96)}, snapOf(66, 74, 14, 102), tier.SheddablePlus, true},
		}},
		{"2x after a slightly busier window: still excess", []step{
			// 66 asked, 60 admitted, 63 the window before (60 at 15/16).
			{[]demandSnap{snapOf(0, 0, 0, 0), snapOf(18, 18, 4, 21), snapOf(36, 36, 8, 42), snapOf(54, 54, 12, 63), snapOf(72, 72, 16, 83), snapOf(90, 90, 20, 103), snapOf(108, 108, 24, 123)}, snapOf(108, 108, 24, 123), tier.SheddablePlus, true},
		}},
		{"old intervals leave the window", []step{
			// An excess of sheddable_plus long ago, then three intervals in
			// which it fits.
			{[]demandSnap{snapOf(0, 0, 0, 0), snapOf(0, 100, 0, 20)}, snapOf(0, 100, 0, 20), tier.SheddablePlus, true},
			{[]demandSnap{snapOf(20, 110, 0, 40), snapOf(40, 120, 0, 60), snapOf(60, 130, 0, 80)}, snapOf(60, 130, 0, 80), tier.SheddablePlus, false},
		}},
	}
	for _, tt := range tests {
		var d demand
		for i, s := range tt.steps {
			for _, p := range s.push {
				d.push(p, false)
			}
			if got := d.excess(s.now, s.t); got != s.want {
				t.Errorf("%s, step %d: excess(%v) = %v, want %v", tt.name, i, s.t, got, s.want)
			}
		}
	}
}
