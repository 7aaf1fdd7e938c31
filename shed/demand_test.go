package shed

import (
	"testing"
	"time"

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

// at gives snapshot s the time ms milliseconds after a fixed origin.
func at(ms int, s demandSnap) demandSnap {
	s.at = time.Unix(1e9, 0).Add(time.Duration(ms) * time.Millisecond)
	return s
}

// TestDemandSaturatedRate: once the stage has shed for two windows, a tier
// is not excess while its demand over them fits in the mean admission rate
// of the saturated intervals of the last second; and the window before is
// scaled to the current window's length.
func TestDemandSaturatedRate(t *testing.T) {
	// 1.25× after a stall with the floor refusing sheddable: per 100 ms
	// interval the tiers above sheddable ask 14 and all 14 are admitted;
	// before that, saturated intervals admitted 20 (200/s).
	build := func(shedFrom int, saturatedRate bool) (*demand, demandSnap) {
		var d demand
		arr, adm := uint64(0), uint64(0)
		for i := 0; i <= 10; i++ {
			ms := i * 100
			sat := saturatedRate && i <= 4 && i > 0 // the drain after the last stall
			if sat {
				arr, adm = arr+20, adm+20
			} else if i > 0 {
				arr, adm = arr+14, adm+14
			}
			d.push(at(ms, snapOf(0, arr, 0, adm)), sat)
			d.noteShedding(at(ms, demandSnap{}).at, ms >= shedFrom)
		}
		// The next stall: 150 ms away, then its 21 held-back requests
		// arrive with the next 14, 60 ms into the open interval.
		now := at(1060, snapOf(0, arr+35, 0, adm+12))
		return &d, now
	}
	for _, c := range []struct {
		name      string
		shedFrom  int
		saturated bool
		want      bool
	}{
		{"shedding for a second, saturated intervals seen: the held-back requests fit", 0, true, false},
		{"no saturated interval in the last second: excess", 0, false, true},
		{"shedding only since 600 ms (two windows hold the calm before): excess", 600, true, true},
	} {
		d, now := build(c.shedFrom, c.saturated)
		if got := d.excess(now, tier.SheddablePlus); got != c.want {
			t.Errorf("%s: excess = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestDemandScaledWindow: 70 ms into the open interval the current window
// spans 370 ms and the window before 300 ms; compared unscaled, 58 asked
// against 57 admitted before (60 at 15/16 → 57) was excess.
func TestDemandScaledWindow(t *testing.T) {
	var d demand
	adm := uint64(0)
	for i := 0; i <= 6; i++ {
		switch {
		case i > 3: // a stall: 10 admitted per interval
			adm += 10
		case i > 0:
			adm += 20
		}
		d.push(at(i*100, snapOf(0, uint64(i)*14, 0, adm)), false)
	}
	// The current window (300-670 ms): 58 of sheddable_plus arrived (16
	// held back by the stall), 40 admitted; the window before (0-300 ms)
	// admitted 60.
	now := at(670, snapOf(0, 6*14+16, 0, adm+10))
	if d.excess(now, tier.SheddablePlus) {
		t.Error("58 asked in 370 ms against 60 admitted in 300 ms: excess, want not")
	}
	if scaled(60, 370*time.Millisecond, 300*time.Millisecond) != 74 {
		t.Errorf("scaled(60, 370ms, 300ms) = %d, want 74", scaled(60, 370*time.Millisecond, 300*time.Millisecond))
	}
}
