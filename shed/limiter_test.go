package shed

import (
	"slices"
	"testing"
	"time"
)

// run feeds the limiter n windows whose latency is model(limit).
func run(l *limiter, n int, model func(limit int) time.Duration) []int {
	var trace []int
	for range n {
		lim := l.Limit()
		rtt := model(lim)
		l.Update(window{Count: 100, Sum: 100 * rtt, MaxInflight: int64(lim)})
		trace = append(trace, l.Limit())
	}
	return trace
}

func TestLimiterCPUBoundConvergesLow(t *testing.T) {
	// One core, 1ms of CPU per request: latency grows with concurrency.
	l := newLimiter(LimitConfig{Initial: 1, Min: 1})
	tr := run(l, 60, func(limit int) time.Duration { return time.Duration(limit) * time.Millisecond })
	for _, v := range tr[20:] {
		if v > 4 {
			t.Fatalf("limit %d under a CPU-bound handler, want ≤ 4 (Tolerance 2 × 1ms baseline); trace %v", v, tr)
		}
	}
}

func TestLimiterSaturatedDependencyFindsItsSlots(t *testing.T) {
	// A dependency with 20 slots of 10ms: latency is flat up to 20 in flight
	// and grows linearly beyond.
	l := newLimiter(LimitConfig{})
	model := func(limit int) time.Duration {
		if limit <= 20 {
			return 10 * time.Millisecond
		}
		return time.Duration(limit) * 10 * time.Millisecond / 20
	}
	tr := run(l, 200, model)
	for _, v := range tr[100:] {
		if v < 15 || v > 50 {
			t.Fatalf("limit %d, want within [15, 50] around 20 slots × tolerance 2; trace %v", v, tr[100:])
		}
	}
}

func TestLimiterDoesNotCollapseUnderSlowDependency(t *testing.T) {
	// Latency is 5ms for 50 windows, then a dependency slows every request
	// to 50ms whatever the concurrency.
	l := newLimiter(LimitConfig{Initial: 40})
	slow := false
	model := func(int) time.Duration {
		if slow {
			return 50 * time.Millisecond
		}
		return 5 * time.Millisecond
	}
	run(l, 50, model)
	before := l.Limit()
	slow = true
	tr := run(l, 100, model)
	low := before
	for _, v := range tr {
		low = min(low, v)
	}
	if low < before/4 {
		t.Fatalf("limit fell from %d to %d under a slow dependency, want ≥ %d; trace %v", before, low, before/4, tr)
	}
	if got := tr[len(tr)-1]; got < before/2 {
		t.Fatalf("limit %d at the end, want it back to ≥ %d; trace %v", got, before/2, tr)
	}
}

func TestLimiterDoesNotCreepWhenUnused(t *testing.T) {
	l := newLimiter(LimitConfig{Initial: 16})
	for range 1000 {
		l.Update(window{Count: 100, Sum: 100 * time.Millisecond, MaxInflight: 3})
	}
	if got := l.Limit(); got != 16 {
		t.Fatalf("limit %d after 1000 windows using 3 slots, want 16 (unchanged)", got)
	}
	for range 1000 {
		l.Update(window{Count: 100, Sum: 100 * time.Millisecond, MaxInflight: int64(l.Limit())})
	}
	if got := l.Limit(); got != 1000 {
		t.Fatalf("binding limit with flat latency: %d, want Max 1000", got)
	}
}

func TestLimiterStaticAndTooFewSamples(t *testing.T) {
	l := newLimiter(LimitConfig{Static: 7})
	run(l, 10, func(int) time.Duration { return time.Second })
	if l.Limit() != 7 {
		t.Fatalf("static limit moved to %d", l.Limit())
	}
	l = newLimiter(LimitConfig{})
	if used := l.Update(window{Count: 9, Sum: time.Second, MaxInflight: 16}); used {
		t.Fatal("window with 9 < MinSamples samples was used")
	}
}

// TestLimiterBacklogStepTable: while the processors are saturated
// (window.Saturated), more requests in flight only wait for a processor, so
// the limit does not grow, tolerates less latency, and a cut that did not
// help is not taken for a slow dependency, also when the window judging it
// looks unsaturated after a saturated one of the same run of cuts.
func TestLimiterBacklogStepTable(t *testing.T) {
	const ms = time.Millisecond
	type win struct {
		rtt     time.Duration
		binding bool
		backlog bool
	}
	tests := []struct {
		name         string
		initial      int
		wins         []win // after a first window that learns a 5 ms baseline
		wantLimit    int
		wantBaseline time.Duration
	}{
		{"binding at baseline grows", 16, []win{{5 * ms, true, false}}, 20, 5 * ms},
		{"binding at baseline under backlog holds", 16, []win{{5 * ms, true, true}}, 16, 5 * ms},
		{"1.6x baseline is tolerated", 16, []win{{8 * ms, false, false}}, 16, 5 * ms},
		{"1.6x baseline under backlog cuts", 16, []win{{8 * ms, false, true}}, 15, 5 * ms},
		{"cuts that did not help re-baseline", 4, []win{{20 * ms, true, false}, {20 * ms, true, false}}, 4, 20 * ms},
		{"under backlog they keep cutting", 4, []win{{20 * ms, true, true}, {20 * ms, true, true}}, 1, 5 * ms},
		// The processors' reading flickers at a limit of 1-2: a window
		// that looks unsaturated after a cut under backlog is no slow
		// dependency (a CPU-bound endpoint re-baselined on one to 3× its
		// latency, then grew to 31 on one processor).
		{"after a cut under backlog, an unsaturated window keeps cutting", 4, []win{{20 * ms, true, true}, {20 * ms, true, false}}, 1, 5 * ms},
		{"a new run of cuts without backlog re-baselines again", 4, []win{{20 * ms, true, true}, {5 * ms, false, false}, {20 * ms, true, false}, {20 * ms, true, false}}, 2, 20 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLimiter(LimitConfig{Initial: tt.initial, Min: 1})
			l.Update(window{Count: 10, Sum: 10 * 5 * ms}) // baseline 5 ms, not binding
			for _, w := range tt.wins {
				var inflight int64
				if w.binding {
					inflight = int64(l.Limit())
				}
				l.Update(window{Count: 10, Sum: 10 * w.rtt, MaxInflight: inflight, Saturated: w.backlog})
			}
			if l.Limit() != tt.wantLimit || l.Baseline() != tt.wantBaseline {
				t.Errorf("limit %d baseline %v, want %d and %v", l.Limit(), l.Baseline(), tt.wantLimit, tt.wantBaseline)
			}
		})
	}
}

// TestLimiterSlowStartStepTable: a limit that binds while requests queue
// and the latency stays flat grows to what was asked of it (in flight plus
// queued), at least doubling and at most quadrupling, and reports the
// window as self-limited; not under saturated processors, not when the
// latency rose, and never again after the first cut.
func TestLimiterSlowStartStepTable(t *testing.T) {
	const ms = time.Millisecond
	type win struct {
		rtt       time.Duration
		queued    bool
		waiting   int64
		saturated bool
	}
	tests := []struct {
		name      string
		wins      []win // every window binding, after a first one that learns a 20 ms baseline at limit 4
		wantLimit int
		wantSelf  bool
	}{
		{"queued at flat latency doubles", []win{{20 * ms, true, 0, false}}, 8, true},
		{"grows to the queue", []win{{20 * ms, true, 7, false}}, 11, true},
		{"at most fourfold", []win{{20 * ms, true, 100, false}}, 16, true},
		{"within 20% is flat", []win{{24 * ms, true, 0, false}}, 8, true},
		{"nobody queued: by √limit", []win{{20 * ms, false, 0, false}}, 6, false},
		{"latency rose: by √limit", []win{{30 * ms, true, 0, false}}, 6, false},
		{"saturated processors hold", []win{{20 * ms, true, 0, true}}, 4, false},
		{"twice in a row", []win{{20 * ms, true, 0, false}, {20 * ms, true, 0, false}}, 16, true},
		{"over after the first cut", []win{{20 * ms, true, 0, false}, {60 * ms, true, 0, false}, {20 * ms, true, 0, false}}, 7, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLimiter(LimitConfig{})
			l.Update(window{Count: 10, Sum: 10 * 20 * ms, MaxInflight: 1}) // baseline 20 ms, not binding
			for _, w := range tt.wins {
				l.Update(window{Count: 10, Sum: 10 * w.rtt, MaxInflight: int64(l.Limit()), Queued: w.queued, Waiting: w.waiting, Saturated: w.saturated})
			}
			if l.Limit() != tt.wantLimit || l.SelfLimited() != tt.wantSelf {
				t.Errorf("limit %d self-limited %v, want %d and %v", l.Limit(), l.SelfLimited(), tt.wantLimit, tt.wantSelf)
			}
		})
	}
}

// TestLimiterProbesAnInflatedBaseline: on saturated processors, a baseline
// learned with several requests in flight is probed at half the limit. A
// CPU-bound endpoint that first saw traffic in a spike at limit 4 (one
// processor, 5 ms per request: 20 ms at 4 in flight) goes down to two in
// flight (probeFloor) and learns 10 ms; a dependency whose latency does not follow the
// limit is probed once, restored, and left alone.
func TestLimiterProbesAnInflatedBaseline(t *testing.T) {
	const ms = time.Millisecond
	cpu5ms := func(n int) time.Duration { return time.Duration(n) * 5 * ms }
	tests := []struct {
		name      string
		initial   int
		model     func(limit int) time.Duration
		wantTrace []int
		wantBase  time.Duration
	}{
		{"cpu-bound, one processor", 4, cpu5ms, []int{2, 2, 2, 2, 2, 2, 2, 2, 2, 2}, 10 * ms},
		{"cpu-bound from 16", 16, cpu5ms, []int{8, 8, 8, 4, 4, 4, 2, 2, 2, 2}, 10 * ms},
		{"dependency", 16, func(int) time.Duration { return 20 * ms },
			[]int{8, 8, 16, 16, 16, 16, 16, 16, 16, 16}, 20 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLimiter(LimitConfig{Initial: tt.initial})
			var trace []int
			for range len(tt.wantTrace) {
				n := l.Limit()
				l.Update(window{Count: 20, Sum: 20 * tt.model(n), MaxInflight: int64(n), Saturated: true, Queued: true})
				trace = append(trace, l.Limit())
			}
			if !slices.Equal(trace, tt.wantTrace) || l.Baseline() != tt.wantBase {
				t.Errorf("limits %v baseline %v, want %v and %v", trace, l.Baseline(), tt.wantTrace, tt.wantBase)
			}
		})
	}
}
