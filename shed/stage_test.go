package shed

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/tier"
)

// harness runs requests against one endpoint of a Shedder inside a synctest
// bubble and records the order in which they were admitted.
type harness struct {
	t  *testing.T
	s  *Shedder
	mu sync.Mutex
	// order of admission, by request name
	order []string
	// results by request name: nil (admitted) or the rejection
	results map[string]error
	release map[string]chan struct{}
}

func newHarness(t *testing.T, c Config) *harness {
	t.Helper()
	if c.Registerer == nil {
		c.Registerer = prometheus.NewRegistry()
	}
	c.Logger = obs.Discard
	s, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return &harness{t: t, s: s, results: map[string]error{}, release: map[string]chan struct{}{}}
}

// start issues request name of tier tr; an admitted request holds its slot
// until finish(name).
func (h *harness) start(ctx context.Context, name string, tr tier.Tier) {
	rel := make(chan struct{})
	h.mu.Lock()
	h.release[name] = rel
	h.mu.Unlock()
	go func() {
		tk, err := h.s.Acquire(ctx, "ep", tr)
		h.mu.Lock()
		h.results[name] = err
		if err == nil {
			h.order = append(h.order, name)
		}
		h.mu.Unlock()
		if err != nil {
			return
		}
		<-rel
		tk.Release()
	}()
	synctest.Wait()
}

func (h *harness) finish(name string) {
	h.mu.Lock()
	rel := h.release[name]
	h.mu.Unlock()
	close(rel)
	synctest.Wait()
}

func (h *harness) result(name string) (error, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	err, ok := h.results[name]
	return err, ok
}

func (h *harness) wantAdmitted(names ...string) {
	h.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.order) != len(names) {
		h.t.Fatalf("admitted %v, want %v", h.order, names)
	}
	for i := range names {
		if h.order[i] != names[i] {
			h.t.Fatalf("admitted %v, want %v", h.order, names)
		}
	}
}

func (h *harness) wantShed(name string, r Reason) {
	h.t.Helper()
	err, ok := h.result(name)
	if !ok {
		h.t.Fatalf("%s still waiting, want shed (%v)", name, r)
	}
	var rj *Rejection
	if !errors.As(err, &rj) || rj.Reason != r || !errors.Is(err, ErrShed) {
		h.t.Fatalf("%s: err %v, want rejection %v", name, err, r)
	}
}

func (h *harness) wantWaiting(name string) {
	h.t.Helper()
	if err, ok := h.result(name); ok {
		h.t.Fatalf("%s finished with %v, want it still queued", name, err)
	}
}

func TestStageFIFOWhenNotOverloaded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Limit: LimitConfig{Static: 1}})
		ctx := context.Background()
		h.start(ctx, "a", tier.SheddablePlus)
		h.start(ctx, "b", tier.SheddablePlus)
		h.start(ctx, "c", tier.SheddablePlus)
		h.wantAdmitted("a")
		time.Sleep(time.Millisecond)
		h.finish("a")
		h.finish("b")
		h.finish("c")
		h.wantAdmitted("a", "b", "c")
	})
}

func TestStageServesHigherTierFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Limit: LimitConfig{Static: 1}})
		ctx := context.Background()
		h.start(ctx, "hold", tier.Sheddable)
		h.start(ctx, "low", tier.Sheddable)
		h.start(ctx, "mid", tier.SheddablePlus)
		h.start(ctx, "crit", tier.Critical)
		h.finish("hold")
		h.finish("crit")
		h.finish("mid")
		h.finish("low")
		h.wantAdmitted("hold", "crit", "mid", "low")
	})
}

// TestStageOverloadShedsLowTiersKeepsCritical holds the only slot for a long
// time: the queue stands, the detector declares overload at the end of the
// first interval in which even the best wait exceeded the target, and then
// sheddable waiters older than 2 × target are dropped (lowest tier first)
// while critical ones keep waiting.
func TestStageOverloadShedsLowTiersKeepsCritical(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Limit: LimitConfig{Static: 1}})
		ctx := context.Background()
		h.start(ctx, "hold", tier.Critical) // t=0, starts the first interval
		h.start(ctx, "s1", tier.Sheddable)
		h.start(ctx, "p1", tier.SheddablePlus)
		h.start(ctx, "c1", tier.Critical)
		time.Sleep(99 * time.Millisecond)
		h.wantWaiting("s1")
		// t=101: the first interval is over, but "hold" started in it
		// without waiting, so its minimum wait was 0: not overloaded.
		time.Sleep(2 * time.Millisecond)
		h.wantWaiting("s1")
		// t=201: nothing started in [100, 200) and the head has waited
		// 200ms: overloaded, and the sweep drops the sheddable waiters.
		time.Sleep(100 * time.Millisecond)
		h.wantShed("s1", ReasonOverload)
		h.wantShed("p1", ReasonOverload)
		h.wantWaiting("c1")
		// A sheddable arriving now is rejected at once: sheddable_plus was
		// being shed, so lower tiers go first.
		h.start(ctx, "s2", tier.Sheddable)
		h.wantShed("s2", ReasonTier)
		h.finish("hold")
		h.wantAdmitted("hold", "c1")
		h.finish("c1")
	})
}

func TestStageAdaptiveLIFOUnderOverload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Limit: LimitConfig{Static: 1}})
		ctx := context.Background()
		h.start(ctx, "hold", tier.Critical)
		h.start(ctx, "c1", tier.Critical)
		time.Sleep(250 * time.Millisecond) // overloaded from t=200
		h.start(ctx, "c2", tier.Critical)
		h.start(ctx, "c3", tier.Critical)
		h.finish("hold")
		h.finish("c3")
		h.finish("c2")
		h.finish("c1")
		h.wantAdmitted("hold", "c3", "c2", "c1")
	})
}

// TestStageEarlyLIFO: before CoDel has called an overload, a sheddable
// tier whose oldest request has waited more than 2 × target is served newest
// first, so that an overload that starts at once does not make every request
// of the detection interval wait for all the ones before it; a tier that is
// never shed stays FIFO (its old requests would starve), and so does a
// queue whose oldest request has not waited that long.
func TestStageEarlyLIFO(t *testing.T) {
	tests := []struct {
		tier tier.Tier
		gap  time.Duration // between b and c; a has waited 4ms + gap when hold finishes
		want []string
	}{
		{tier.SheddablePlus, 8 * time.Millisecond, []string{"hold", "c", "b", "a"}},
		{tier.Sheddable, 8 * time.Millisecond, []string{"hold", "c", "b", "a"}},
		{tier.SheddablePlus, 5 * time.Millisecond, []string{"hold", "a", "b", "c"}}, // 9 ms: not above 2 × 5 ms
		{tier.Critical, 8 * time.Millisecond, []string{"hold", "a", "b", "c"}},
	}
	for _, tt := range tests {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t, Config{Limit: LimitConfig{Static: 1}, Target: 5 * time.Millisecond})
			h.s.rq = nil
			ctx := context.Background()
			h.start(ctx, "hold", tt.tier)
			h.start(ctx, "a", tt.tier)
			time.Sleep(4 * time.Millisecond)
			h.start(ctx, "b", tt.tier)
			time.Sleep(tt.gap)
			h.start(ctx, "c", tt.tier)
			for _, n := range tt.want {
				h.finish(n)
			}
			h.wantAdmitted(tt.want...)
			for _, n := range tt.want {
				if err, _ := h.result(n); err != nil {
					t.Fatalf("%v: %s shed (%v): nothing is overloaded yet", tt.tier, n, err)
				}
			}
		})
	}
}

func TestStageDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Limit: LimitConfig{Static: 1}})
		h.start(context.Background(), "hold", tier.Critical)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		h.start(ctx, "late", tier.Critical)
		time.Sleep(25 * time.Millisecond)
		synctest.Wait()
		h.wantShed("late", ReasonDeadline)
		expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		defer cancel2()
		h.start(expired, "expired", tier.CriticalPlus)
		h.wantShed("expired", ReasonDeadline)
		h.finish("hold")
	})
}

func TestStageQueueFullEvictsLowerTier(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Limit: LimitConfig{Static: 1}, MaxQueue: 2})
		ctx := context.Background()
		h.start(ctx, "hold", tier.Critical)
		h.start(ctx, "s", tier.Sheddable)
		h.start(ctx, "c1", tier.Critical)
		h.start(ctx, "c2", tier.Critical) // evicts s
		h.wantShed("s", ReasonQueueFull)
		h.start(ctx, "c3", tier.Critical) // nothing lower to evict
		h.wantShed("c3", ReasonQueueFull)
		h.finish("hold")
		h.finish("c1")
		h.finish("c2")
		h.wantAdmitted("hold", "c1", "c2")
	})
}

// TestStageFloorHoldsFromTheLastDrop: the tiers below one dropped for
// overload stay refused for FloorHold after that drop, even when no interval
// ended overloaded since (a tier's queue is swept between interval ends).
func TestStageFloorHoldsFromTheLastDrop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Limit: LimitConfig{Static: 1}})
		h.s.rq = nil
		ctx := context.Background()
		h.start(ctx, "warm", tier.Critical) // the stage exists, its intervals run
		h.finish("warm")
		st := h.s.stage("ep")
		st.mu.Lock()
		st.dropLocked(&waiter{tier: tier.SheddablePlus, ready: make(chan struct{}, 1)}, ReasonOverload, time.Now())
		st.mu.Unlock()
		time.Sleep(FloorHold - 100*time.Millisecond)
		h.start(ctx, "early", tier.Sheddable)
		h.wantShed("early", ReasonTier)
		h.start(ctx, "plus", tier.SheddablePlus) // the dropped tier itself is not refused
		h.finish("plus")
		time.Sleep(500 * time.Millisecond) // FloorHold has passed; the floor decays
		h.start(ctx, "late", tier.Sheddable)
		h.finish("late")
		h.wantAdmitted("warm", "plus", "late")
	})
}

// TestStageRecoversAfterOverload checks the way out: once the queue drains,
// an interval of short waits clears the overload and admits everyone.
func TestStageRecoversAfterOverload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Limit: LimitConfig{Static: 1}})
		ctx := context.Background()
		h.start(ctx, "hold", tier.Critical)
		h.start(ctx, "s1", tier.SheddablePlus)
		time.Sleep(250 * time.Millisecond)
		if !h.s.Stats()[0].Overloaded {
			t.Fatal("not overloaded after a 250ms standing queue")
		}
		h.wantShed("s1", ReasonOverload)
		h.finish("hold")
		// Within FloorHold of the overload, the tier below the one shed is
		// still refused; after it, everyone is admitted again.
		time.Sleep(250 * time.Millisecond)
		h.start(ctx, "early", tier.Sheddable)
		h.wantShed("early", ReasonTier)
		time.Sleep(FloorHold)
		h.start(ctx, "x", tier.Sheddable)
		h.finish("x")
		time.Sleep(100 * time.Millisecond)
		h.start(ctx, "y", tier.Sheddable)
		h.finish("y")
		if h.s.Stats()[0].Overloaded {
			t.Fatal("still overloaded after idle intervals")
		}
		h.wantAdmitted("hold", "x", "y")
	})
}
