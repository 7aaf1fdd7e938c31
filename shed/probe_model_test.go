package shed

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/veerhq/veer/tier"
)

// congestedDep is a dependency with a number of slots of a fixed service
// time, shared with other callers: while they congest it, each of our
// requests first waits extra (its queue behind theirs) before it gets a slot.
type congestedDep struct {
	slots chan struct{}
	d     time.Duration
	extra atomic.Int64 // ns
}

func (c *congestedDep) serve() {
	time.Sleep(time.Duration(c.extra.Load()))
	c.slots <- struct{}{}
	time.Sleep(c.d)
	<-c.slots
}

// TestModelMinRTTProbe: an endpoint starts while its dependency (20 slots ×
// 20 ms, capacity 1000/s) is congested by other callers (80 ms of queue
// before every request of ours), at 1200 req/s, more than the dependency
// serves. It learns a baseline of about 100 ms. The other callers leave; our
// own load still exceeds the capacity, so our requests in flight beyond the
// 20 slots now queue in the dependency, and the latency is our own
// concurrency: limit × 1 ms. Without the periodic probe nothing in the
// gradient brings the limit down (the latency stays within tolerance of the
// inflated baseline). Steps: each runs for its duration and checks the mean
// service time of the requests admitted in its last 500 ms.
func TestModelMinRTTProbe(t *testing.T) {
	steps := []struct {
		dur     time.Duration
		extra   time.Duration
		maxMean time.Duration // 0: not checked
	}{
		{1 * time.Second, 80 * time.Millisecond, 0},
		{2 * time.Second, 0, 0},
		{3 * time.Second, 0, 0},
		{2 * time.Second, 0, 45 * time.Millisecond},
	}
	synctest.Test(t, func(t *testing.T) {
		s, _ := newShedder(t, Config{})
		s.rq = nil
		dep := &congestedDep{slots: make(chan struct{}, 20), d: 20 * time.Millisecond}
		const rate = 1200
		type rec struct{ at, svc time.Duration }
		var mu sync.Mutex
		var recs []rec
		var wg sync.WaitGroup
		start := time.Now()
		var at, end time.Duration
		var ends []time.Duration
		var limits []int
		for _, st := range steps {
			dep.extra.Store(int64(st.extra))
			end += st.dur
			ends = append(ends, end)
			for ; at < end; at += time.Second / rate {
				time.Sleep(time.Until(start.Add(at)))
				if st := s.Stats(); len(st) > 0 && len(limits) < int(at/(100*time.Millisecond)) {
					limits = append(limits, st[0].Limit)
				}
				at := at
				wg.Go(func() {
					tk, err := s.Acquire(context.Background(), "ep", tier.Sheddable)
					if err != nil {
						return
					}
					t0 := time.Now()
					dep.serve()
					tk.Release()
					mu.Lock()
					recs = append(recs, rec{at, time.Since(t0)})
					mu.Unlock()
				})
			}
		}
		wg.Wait()
		t.Logf("limit every 100 ms: %v", limits)
		for i, st := range steps {
			var sum time.Duration
			var n int
			for _, r := range recs {
				if r.at >= ends[i]-500*time.Millisecond && r.at < ends[i] {
					sum += r.svc
					n++
				}
			}
			mean := sum / time.Duration(max(n, 1))
			t.Logf("step %d (extra %v): mean service %v, %d requests served in the last 500 ms", i, st.extra, mean, n)
			if st.maxMean > 0 && mean > st.maxMean {
				t.Errorf("step %d: mean service time %v, want ≤ %v", i, mean, st.maxMean)
			}
		}
	})
}
