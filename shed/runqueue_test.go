package shed

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/tier"
)

// TestYieldOnlyWhileBusy: an admitted request of a sheddable tier yields
// its processor once while the run queue has a backlog, so that waiting
// requests reach the stage before its handler runs; a tier that is never
// shed yields only when its endpoint is contended as well (shedding, or
// requests queued), and nothing yields when the run queue is calm.
func TestYieldOnlyWhileBusy(t *testing.T) {
	tests := []struct {
		busy, contended bool
		tier            tier.Tier
		want            int
	}{
		{false, false, tier.Sheddable, 0},
		{false, false, tier.Critical, 0},
		{false, true, tier.Critical, 0},
		{true, false, tier.Sheddable, 1},
		{true, false, tier.SheddablePlus, 1},
		{true, false, tier.Critical, 0},
		{true, false, tier.CriticalPlus, 0},
		{true, true, tier.Sheddable, 1},
		{true, true, tier.Critical, 1},
		{true, true, tier.CriticalPlus, 1},
	}
	for _, tt := range tests {
		s, _ := newShedder(t, Config{})
		rq := &fixedRunQueue{}
		rq.isBusy.Store(tt.busy)
		s.rq = rq
		yields := 0
		s.yield = func() { yields++ }
		acquireOnce(t, s, tt.contended, tt.tier)
		if yields != tt.want {
			t.Errorf("busy %v, contended %v, %v: %d yields, want %d", tt.busy, tt.contended, tt.tier, yields, tt.want)
		}
	}
}

// TestSaturationKeepsOverload: when the processors are saturated, a slot
// that frees with nobody in the stage queue does not mean the standing
// queue drained (the requests are still in the run queue, on their way to
// the stage), so the overload state holds; without saturation the same
// intervals clear it, and so does the end of the saturation.
//
// In virtual time with one slot: requests arrive every 10 ms and each holds
// the slot for 20 ms, so a standing queue builds and is detected; then they
// come in pairs every 20 ms holding the slot 4 ms each (the bursts in which
// requests reach the stage from the run queue: the first starts at once,
// the second waits 4 ms, below target, and the slot is idle in between).
func TestSaturationKeepsOverload(t *testing.T) {
	for _, saturated := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			s, _ := newShedder(t, Config{Limit: LimitConfig{Static: 1}})
			rq := &fixedRunQueue{}
			rq.isBusy.Store(saturated)
			rq.isSaturated.Store(saturated)
			s.rq = rq
			s.yield = func() {}
			ctx := context.Background()
			var wg sync.WaitGroup
			serve := func(d time.Duration) func() {
				return func() {
					if tk, err := s.Acquire(ctx, "ep", tier.SheddablePlus); err == nil {
						time.Sleep(d)
						tk.Release()
					}
				}
			}
			for range 60 { // 600 ms at twice the capacity
				wg.Go(serve(20 * time.Millisecond))
				time.Sleep(10 * time.Millisecond)
			}
			wg.Wait()
			st := s.lookup("ep")
			if !st.overloaded.Load() {
				t.Fatalf("saturated %v: a standing queue at 2x capacity is not overloaded", saturated)
			}
			pairs := func(n int) {
				for range n {
					wg.Go(serve(4 * time.Millisecond))
					wg.Go(serve(4 * time.Millisecond))
					time.Sleep(20 * time.Millisecond)
				}
				wg.Wait()
			}
			pairs(25) // 500 ms
			if got := st.overloaded.Load(); got != saturated {
				t.Errorf("saturated %v: overloaded after 500 ms of short bursts = %v, want %v", saturated, got, saturated)
			}
			rq.isBusy.Store(false)
			rq.isSaturated.Store(false)
			pairs(25)
			if st.overloaded.Load() {
				t.Errorf("saturated %v: still overloaded 500 ms after the saturation ended", saturated)
			}
		})
	}
}

// TestEffectiveTarget: a wait of two turns (the time the queue takes to
// advance by one request) is not a standing queue. One slot serving 5 ms
// requests back to back advances every 5 ms: the target becomes 10 ms. Twenty
// slots of 20 ms advance every millisecond: the configured 5 ms stays.
func TestEffectiveTarget(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		slots int
		svc   time.Duration
		want  time.Duration
	}{
		{1, 5 * ms, 10 * ms},
		{20, 20 * ms, 5 * ms},
		{1, 1 * ms, 5 * ms},
	}
	for _, tt := range tests {
		clk := clock.NewManual(time.Unix(1000, 0))
		s, _ := newShedder(t, Config{Clock: clk, Limit: LimitConfig{Static: tt.slots}})
		s.rq = nil
		ctx := context.Background()
		for clk.Now().Before(time.Unix(1000, 0).Add(time.Second)) {
			var tks []Ticket
			for range tt.slots {
				tk, err := s.Acquire(ctx, "ep", tier.Critical)
				if err != nil {
					t.Fatal(err)
				}
				tks = append(tks, tk)
			}
			clk.Advance(tt.svc)
			for _, tk := range tks {
				tk.Release()
			}
		}
		if got := s.lookup("ep").effectiveTarget(s.pol.Load()); got != tt.want {
			t.Errorf("%d slots × %v: effective target %v, want %v", tt.slots, tt.svc, got, tt.want)
		}
	}
}

// acquireOnce admits one request of tier t at endpoint "ep" and releases
// it; contended makes the endpoint shedding first (shed within FloorHold).
func acquireOnce(t *testing.T, s *Shedder, contended bool, tr tier.Tier) {
	t.Helper()
	if contended {
		st := s.stage("ep")
		st.mu.Lock()
		st.lastOver = time.Now()
		st.mu.Unlock()
		st.shedding.Store(true)
	}
	tk, err := s.Acquire(context.Background(), "ep", tr)
	if err != nil {
		t.Fatal(err)
	}
	tk.Release()
}

// fixedRunQueue is a run queue whose state the test sets.
type fixedRunQueue struct{ isBusy, isSaturated atomic.Bool }

func (f *fixedRunQueue) Observe(time.Time) {}
func (f *fixedRunQueue) Busy() bool        { return f.isBusy.Load() }
func (f *fixedRunQueue) Saturated() bool   { return f.isSaturated.Load() }
