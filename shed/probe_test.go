package shed

import (
	"testing"
	"time"
)

// probeStarts feeds the limiter n unsaturated windows (binding: as many in
// flight as the limit) whose latency is model(window, limit), and returns
// the windows at which a probe halved the limit and the limits.
func probeStarts(l *limiter, n int, model func(i, limit int) time.Duration) (starts, limits []int) {
	for i := range n {
		lim := l.Limit()
		rtt := model(i, lim)
		wasProbing := l.probeFrom > 0
		l.Update(window{Count: 100, Sum: 100 * rtt, MaxInflight: int64(lim), Span: 100 * time.Millisecond})
		if !wasProbing && l.probeFrom > 0 {
			starts = append(starts, i)
		}
		limits = append(limits, l.Limit())
	}
	return starts, limits
}

// TestLimiterPeriodicProbe: the periodic minimum-latency probe, step by
// step. A baseline learned while a dependency was congested is probed
// (after probeEvery windows) and the limit follows the latency down; a
// baseline that is sound but looks inflated (learned at the limit) is
// probed at gaps that double; one learned at low concurrency, or by slow
// start, is never probed.
func TestLimiterPeriodicProbe(t *testing.T) {
	const ms = time.Millisecond
	t.Run("congested at start: found and followed down", func(t *testing.T) {
		// 20 slots × 20 ms: beyond 20 in flight our requests queue in
		// the dependency (1 ms each); 80 ms of congestion from other
		// callers for the first 10 windows.
		dep := func(i, limit int) time.Duration {
			d := max(20*ms, time.Duration(limit)*ms)
			if i < 10 {
				d += 80 * ms
			}
			return d
		}
		l := newLimiter(LimitConfig{Initial: 200})
		l.seed("ep")
		starts, limits := probeStarts(l, 120, dep)
		if len(starts) == 0 || starts[0] < probeEvery {
			t.Fatalf("probes at windows %v, want the first at ≥ %d", starts, probeEvery)
		}
		for _, v := range limits[:starts[0]] {
			if v < 100 {
				t.Fatalf("limit %d before the first probe, want it held (the inflated baseline hides the queue); limits %v", v, limits)
			}
		}
		if last := limits[len(limits)-1]; last < 15 || last > 50 {
			t.Errorf("limit %d at the end, want within [15, 50] (20 slots, tolerance 2); probes at %v, limits %v", last, starts, limits)
		}
		if l.Baseline() > 25*ms {
			t.Errorf("baseline %v, want the dependency's 20 ms", l.Baseline())
		}
	})
	t.Run("sound baseline that looks inflated: gaps double", func(t *testing.T) {
		// Latency does not follow concurrency (100 ms whatever the
		// limit), the limit is capped at its initial value so the
		// baseline stays learned at the limit; one window of 250 ms
		// ends slow start with a cut.
		flat := func(i, _ int) time.Duration {
			if i == 1 {
				return 250 * ms
			}
			return 100 * ms
		}
		l := newLimiter(LimitConfig{Initial: 64, Max: 64})
		l.seed("ep")
		starts, limits := probeStarts(l, 1500, flat)
		if len(starts) < 4 {
			t.Fatalf("probes at %v, want at least 4 in 1500 windows", starts)
		}
		for k := 1; k < len(starts); k++ {
			gap := starts[k] - starts[k-1]
			// The probe lasts 2 windows (2 × 100 ms ≥ 2 × rtt); the gap
			// before the k-th is probeEvery × 2^k plus up to half.
			lo := probeEvery << k
			if gap < lo || gap > lo+lo/2+3 {
				t.Errorf("gap %d before probe %d, want within [%d, %d]; probes at %v", gap, k, lo, lo+lo/2+3, starts)
			}
		}
		probing := 0
		for _, v := range limits[100:] {
			if v != 64 {
				probing++
			}
		}
		if probing > 2*len(starts) {
			t.Errorf("%d windows of 1400 below the limit, want at most 2 per probe (%d probes)", probing, len(starts))
		}
	})
	t.Run("baseline learned at low concurrency: never probed", func(t *testing.T) {
		// 20 slots × 20 ms, starting at 4: the baseline is learned at 4
		// in flight and the limit settles around 40.
		dep := func(_, limit int) time.Duration { return max(20*ms, time.Duration(limit)*ms) }
		l := newLimiter(LimitConfig{})
		l.seed("ep")
		if starts, limits := probeStarts(l, 600, dep); len(starts) != 0 {
			t.Errorf("probes at %v, want none; limits %v", starts, limits)
		}
	})
	t.Run("cold start behind a dependency: never probed", func(t *testing.T) {
		// Slow start: requests queue behind the limit at flat latency
		// (20 slots × 20 ms at 10 in flight), the limit grows from 4.
		l := newLimiter(LimitConfig{})
		l.seed("ep")
		for i := range 300 {
			lim := l.Limit()
			n := min(lim, 10)
			wasProbing := l.probeFrom > 0
			l.Update(window{Count: 100, Sum: 100 * 20 * ms, MaxInflight: int64(n), Queued: lim < 10, Waiting: int64(max(0, 10-lim)), Span: 100 * ms})
			if !wasProbing && l.probeFrom > 0 {
				t.Fatalf("probe at window %d (limit %d, baseline learned at %d)", i, lim, l.baseConc)
			}
		}
	})

}
