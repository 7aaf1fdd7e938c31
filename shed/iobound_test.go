package shed

import (
	"errors"
	"strings"
	"testing"

	"github.com/veerhq/veer/tier"
)

// TestIOBoundNeverYields: with Config.IOBound an admitted request starts at
// once in every state in which TestYieldOnlyWhileBusy's default Shedder
// yields (run queue busy, processors saturated so that a sheddable tier
// would wait for its start turn, endpoint contended or not, every tier),
// and the same rows without IOBound do yield, so the table cannot pass by a
// yield that never runs.
func TestIOBoundNeverYields(t *testing.T) {
	tests := []struct {
		busy, saturated, contended bool
		tier                       tier.Tier
		wantDefault                bool // the default Shedder yields at least once
	}{
		{false, false, false, tier.Sheddable, false},
		{true, false, false, tier.Sheddable, true},
		{true, false, false, tier.SheddablePlus, true},
		{true, true, false, tier.Sheddable, true},
		{true, false, true, tier.Critical, true},
		{true, true, true, tier.Critical, true},
		{true, true, true, tier.CriticalPlus, true},
		{true, true, true, tier.Sheddable, true},
	}
	for _, tt := range tests {
		for _, io := range []bool{false, true} {
			s, _ := newShedder(t, Config{IOBound: io})
			rq := &fixedRunQueue{}
			rq.isBusy.Store(tt.busy)
			rq.isSaturated.Store(tt.saturated)
			s.rq = rq
			yields := 0
			s.yield = func() { yields++ }
			s.settle = func() {}
			acquireOnce(t, s, tt.contended, tt.tier)
			want := tt.wantDefault && !io
			if got := yields > 0; got != want {
				t.Errorf("io_bound %v, busy %v, saturated %v, contended %v, %v: %d yields, want yields %v",
					io, tt.busy, tt.saturated, tt.contended, tt.tier, yields, want)
			}
		}
	}
}

// TestIOBoundIsWiring: IOBound belongs to New, like the other wiring
// fields: Apply refuses it by name and changes nothing, and a Shedder built
// with it keeps it over an Apply of its file config.
func TestIOBoundIsWiring(t *testing.T) {
	s, _ := newShedder(t, Config{IOBound: true, DefaultTier: tier.Sheddable})
	err := s.Apply(Config{IOBound: true, DefaultTier: tier.Critical})
	if err == nil || !strings.Contains(err.Error(), "IOBound:") || !errors.Is(err, errFixed) {
		t.Fatalf("Apply(IOBound) = %v, want errFixed naming IOBound", err)
	}
	if got := s.Resolve("e", "c", tier.Unset); got != tier.Sheddable {
		t.Fatalf("refused Apply changed the default tier to %v", got)
	}
	if err := s.Apply(Config{DefaultTier: tier.Critical}); err != nil {
		t.Fatal(err)
	}
	if !s.ioBound {
		t.Fatal("an Apply without IOBound turned it off")
	}
}
