package shed

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/veerhq/veer/tier"
)

// TestModelSchedOverload is the bench's scenario 1 (1.25×, 2× and 6× of a
// one-core, 5 ms CPU-bound endpoint after 500 ms at half the capacity; the
// bench's random tier mix) with the Go scheduler and the run-queue yield
// modelled (modelCore with sched): a request granted its slot runs next,
// and a yield parks it until the run queue drains or the runtime polls.
// It guards the yield's rule for the tiers that are never shed (they yield
// on a contended endpoint): letting them skip the yield, tried for the
// storm's critical p99 (TestModelStormOnset), raised the 6× p99 of
// admitted requests from 44-60 ms to 49-88 ms over seeds 1-8 (the other
// tiers' p99 from 37-48 to 52-106 ms), and critical requests were no
// faster: a yielding critical request lets the critical requests behind
// it in the run queue reach the stage and take the next slot before a
// lower tier's request takes it on arrival.
func TestModelSchedOverload(t *testing.T) {
	type row struct {
		load       float64
		seed       uint64
		minGoodput float64
		maxP99     time.Duration
	}
	var rows []row
	for seed := uint64(1); seed <= 3; seed++ {
		rows = append(rows, row{1.25, seed, 0.95, 80 * time.Millisecond}, row{2, seed, 0.95, 95 * time.Millisecond})
	}
	for seed := uint64(1); seed <= 8; seed++ {
		rows = append(rows, row{6, seed, 0.9, 70 * time.Millisecond})
	}
	for _, c := range rows {
		synctest.Test(t, func(t *testing.T) {
			s, _ := newShedder(t, Config{})
			core := newModelCore(true)
			s.rq, s.yield = core, core.yield
			rng := rand.New(rand.NewPCG(c.seed, 2))
			start := time.Now()
			var mu sync.Mutex
			var ok, shed, n, critSent int
			var lat, crit []time.Duration
			var wg sync.WaitGroup
			for at := time.Duration(0); at < 3500*time.Millisecond; {
				rate := c.load * 200
				if at < 500*time.Millisecond {
					rate = 100
				}
				at += time.Duration(float64(time.Second) / rate)
				time.Sleep(time.Until(start.Add(at)))
				tr := tier.Sheddable
				switch u := rng.Float64(); {
				case u < 0.1:
					tr = tier.Critical
				case u < 0.55:
					tr = tier.SheddablePlus
				}
				measured := at >= 500*time.Millisecond
				wg.Go(func() {
					sent := time.Now()
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					defer cancel()
					core.use(refusalCost)
					tk, err := s.Acquire(ctx, "ep", tr)
					if err == nil {
						core.useNext(modelHandler)
						tk.Release()
					}
					d := time.Since(sent)
					mu.Lock()
					defer mu.Unlock()
					if !measured {
						return
					}
					n++
					if tr == tier.Critical {
						critSent++
					}
					if err != nil || d > time.Second {
						shed++
						return
					}
					ok++
					lat = append(lat, d)
					if tr == tier.Critical {
						crit = append(crit, d)
					}
				})
			}
			wg.Wait()
			p99 := func(v []time.Duration) time.Duration { slices.Sort(v); return v[len(v)*99/100] }
			goodput := float64(ok) / 3 / 200
			t.Logf("%.2fx seed %d: goodput %.2f of capacity, shed %.1f%%, p99 %v, critical %d/%d p99 %v",
				c.load, c.seed, goodput, 100*float64(shed)/float64(n), p99(lat), len(crit), critSent, p99(crit))
			if goodput < c.minGoodput || p99(lat) > c.maxP99 || len(crit) != critSent {
				t.Errorf("%.2fx seed %d: goodput %.2f (want ≥ %.2f), p99 %v (want ≤ %v), critical %d/%d",
					c.load, c.seed, goodput, c.minGoodput, p99(lat), c.maxP99, len(crit), critSent)
			}
		})
	}
}
