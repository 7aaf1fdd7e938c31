package shed

import (
	"context"
	"testing"
	"time"

	"github.com/veerhq/veer/tier"
)

// TestTierMix is tierMix's step table: tiers noted in an interval and the
// one before count; two intervals later they are forgotten.
func TestTierMix(t *testing.T) {
	const ms = int64(time.Millisecond)
	base := time.Unix(1000, 0).UnixNano()
	var m tierMix
	steps := []struct {
		tier  tier.Tier
		next  int64 // the interval's end
		mixed bool
	}{
		{tier.Critical, base, false},
		{tier.Critical, base, false},
		{tier.CriticalPlus, base, true},
		{tier.Critical, base + 100*ms, true}, // the previous interval had critical_plus
		{tier.Critical, base + 200*ms, false},
		{tier.Sheddable, base + 200*ms, true},
		{tier.Unset, base + 300*ms, true}, // not a tier: ignored, the interval does not move
		{tier.Critical, base + 300*ms, true},
		{tier.Critical, base + 400*ms, false},
	}
	for i, s := range steps {
		m.note(s.tier, s.next)
		if got := m.mixed(); got != s.mixed {
			t.Fatalf("step %d (%v at +%v): mixed %v, want %v", i, s.tier, time.Duration(s.next-base), got, s.mixed)
		}
	}
}

// TestOneTierDoesNotYield: on a busy run queue, a request of a tier that is
// never shed, at an endpoint that queues (contended), yields only when
// another tier reached the endpoint lately: with one tier alone there is no
// order to keep and nothing to shed (a gateway whose requests all take the
// default tier paid a poll for nothing). A sheddable tier always yields.
func TestOneTierDoesNotYield(t *testing.T) {
	tests := []struct {
		others []tier.Tier // tiers that arrived before, in this interval
		tier   tier.Tier
		want   int
	}{
		{nil, tier.Critical, 0},
		{[]tier.Tier{tier.Critical}, tier.Critical, 0},
		{[]tier.Tier{tier.CriticalPlus}, tier.Critical, 1},
		{[]tier.Tier{tier.Sheddable}, tier.Critical, 1},
		{[]tier.Tier{tier.Critical}, tier.CriticalPlus, 1},
		{nil, tier.Sheddable, 1},
		{[]tier.Tier{tier.Sheddable}, tier.Sheddable, 1},
	}
	for _, tt := range tests {
		s, _ := newShedder(t, Config{})
		rq := &fixedRunQueue{}
		rq.isBusy.Store(true)
		s.rq = rq
		yields := 0
		s.yield = func() { yields++ }
		st := s.stage("ep")
		st.queued.Store(1) // counted as waiting: the endpoint is contended (the slot is still free)
		for _, o := range tt.others {
			st.mix.note(o, st.nextTick.Load())
		}
		tk, err := st.acquire(context.Background(), tt.tier, s.pol.Load())
		st.queued.Store(0)
		if err != nil {
			t.Fatalf("%v after %v: %v", tt.tier, tt.others, err)
		}
		tk.Release()
		if yields != tt.want {
			t.Errorf("%v after %v: %d yields, want %d", tt.tier, tt.others, yields, tt.want)
		}
	}
}
