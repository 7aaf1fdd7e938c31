package shed

import (
	"context"
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
// run-queue probe reading how many wait for the core (coreQueue). The
// plain model (TestModelOverload) delivers requests straight to the stage
// and does not over-shed; this one reproduces issue 18's point 3 at 1.25×:
// goodput 0.73 of capacity with 41.6% shed (the load needs 20%), the
// sheddable tier refused on arrival (reason tier) for most of the run after
// sheddable_plus waiters were dropped, while the core idles. The 0.95
// target of issue 18 is therefore MISSED; the bounds below hold today's
// figures (0.75× 0.75, 1.25× 0.73, 2× 0.99, 6× 0.96, critical 100%) so that
// a change can be judged against them, deterministically.
func TestModelRunQueueOverload(t *testing.T) {
	for _, c := range []struct {
		load, minGoodput, maxShed float64
	}{
		{0.75, 0.74, 0},
		{1.25, 0.70, 0.45},
		{2, 0.95, 0.55},
		{6, 0.90, 0.86},
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
			start := time.Now()
			var mu sync.Mutex
			var ok, shed, n, critSent, critOK int
			var wg sync.WaitGroup
			rate := c.load * 200
			for at := time.Duration(0); at < 3500*time.Millisecond; at += time.Duration(float64(time.Second) / rate) {
				time.Sleep(time.Until(start.Add(at)))
				tr := tier.Sheddable
				switch u := float64(int(at/time.Microsecond)%997) / 997; {
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
			t.Logf("%.2fx: goodput %.2f of capacity, shed %.1f%%, critical %d/%d", c.load, goodput, 100*shedRate, critOK, critSent)
			if goodput < c.minGoodput || shedRate > c.maxShed || critOK != critSent {
				t.Errorf("%.2fx: goodput %.2f (want ≥ %.2f), shed %.3f (want ≤ %.2f), critical %d/%d", c.load, goodput, c.minGoodput, shedRate, c.maxShed, critOK, critSent)
			}
		})
	}
}
