package shed

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/veerhq/veer/tier"
)

// TestModelRunQueueOverload runs the bench's scenario 1 in virtual time
// with the queue in front of the stage modelled: one core that every
// request needs, first for 35 µs (read and parse) and, once admitted, for
// its 5 ms handler, in arrival order (a FIFO token), with the runtime's
// run-queue probe reading how many wait for the core (coreQueue), and the
// bench's random tier mix (seeds 1-3). Issue 18's point 3 (at 1.25× only
// the excess should go: goodput ≥ 0.95 of capacity) holds here in every
// seed: 0.99 with 20-21% shed. So the over-shedding the real bench showed
// in some rounds is not reproduced by the stage's logic with a run queue in
// front. One thing that does reproduce it: tiers arriving in long runs of
// one tier (a first version of this test drew the tier from the arrival
// time modulo a prime, which sent ~37 sheddable_plus requests in a row,
// 250/s of it alone for 150 ms): sheddable_plus was then rightly dropped,
// the floor refused every sheddable request for FloorHold while the core
// idled, and 1.25× fell to 0.73 with 41.6% shed (the last row). A floor
// that refuses on arrival only while the stage is busy (a free slot and an
// empty queue admit the lower tier: work-conserving) was tried: the runs
// case rose to 0.99 and the random cases did not move, but the plain model's
// 2× case had 4 seconds with order violations instead of 1, and
// TestStageFloorHoldsFromTheLastDrop failed: it breaks strict order, which
// issue 18 keeps as a target, so it was not kept.
func TestModelRunQueueOverload(t *testing.T) {
	for _, c := range []struct {
		load, minGoodput, maxShed float64
		seed                      uint64
		runs                      bool // tiers in long runs (arrival time modulo a prime)
	}{
		{0.75, 0.74, 0, 1, false},
		{1.25, 0.95, 0.25, 1, false},
		{1.25, 0.95, 0.25, 2, false},
		{1.25, 0.95, 0.25, 3, false},
		{2, 0.95, 0.55, 1, false},
		{6, 0.90, 0.86, 1, false},
		// Tiers in runs: today's figure (0.73, 41.6% shed) bounded, the
		// 0.95 target missed; see the comment above.
		{1.25, 0.70, 0.45, 1, true},
	} {
		synctest.Test(t, func(t *testing.T) {
			s, _ := newShedder(t, Config{})
			rq := &coreQueue{}
			s.rq, s.yield = rq, func() {}
			core := newModelServer(1, 5*time.Millisecond)
			use := func(d time.Duration) {
				rq.waiting.Add(1)
				core.tok <- struct{}{}
				rq.waiting.Add(-1)
				time.Sleep(d)
				<-core.tok
			}
			rng := rand.New(rand.NewPCG(c.seed, 2))
			start := time.Now()
			var mu sync.Mutex
			var ok, shed, n, critSent, critOK int
			var wg sync.WaitGroup
			rate := c.load * 200
			for at := time.Duration(0); at < 3500*time.Millisecond; at += time.Duration(float64(time.Second) / rate) {
				time.Sleep(time.Until(start.Add(at)))
				tr := tier.Sheddable
				u := rng.Float64()
				if c.runs {
					u = float64(int(at/time.Microsecond)%997) / 997
				}
				switch {
				case u < 0.1:
					tr = tier.Critical
				case u < 0.55:
					tr = tier.SheddablePlus
				}
				measured := at >= 500*time.Millisecond
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					defer cancel()
					use(refusalCost)
					tk, err := s.Acquire(ctx, "ep", tr)
					if err == nil {
						use(core.d)
						tk.Release()
					}
					mu.Lock()
					defer mu.Unlock()
					if !measured {
						return
					}
					n++
					if tr == tier.Critical {
						critSent++
					}
					if err == nil {
						ok++
						if tr == tier.Critical {
							critOK++
						}
					} else {
						shed++
					}
				})
			}
			wg.Wait()
			goodput, shedRate := float64(ok)/3/200, float64(shed)/float64(n)
			t.Logf("runs %v seed %d %.2fx: goodput %.2f of capacity, shed %.1f%%, critical %d/%d", c.runs, c.seed, c.load, goodput, 100*shedRate, critOK, critSent)
			if goodput < c.minGoodput || shedRate > c.maxShed || critOK != critSent {
				t.Errorf("%.2fx: goodput %.2f (want ≥ %.2f), shed %.3f (want ≤ %.2f), critical %d/%d", c.load, goodput, c.minGoodput, shedRate, c.maxShed, critOK, critSent)
			}
		})
	}
}
