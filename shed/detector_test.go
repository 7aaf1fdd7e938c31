package shed

import (
	"testing"
	"time"

	"github.com/veerhq/veer/clock"
)

// TestDetectorSteps drives the CoDel detector through a step table on a
// manual clock: (time advance, event, expected state).
func TestDetectorSteps(t *testing.T) {
	const ms = time.Millisecond
	type step struct {
		advance  time.Duration
		event    string        // "start" (a request started), "tick" (interval check), "drain" (queue empty), "backlog" (requests wait upstream)
		wait     time.Duration // start: its queue wait; tick: head-of-queue wait
		queued   bool          // tick: a queue is standing
		wantOver bool
		dropAt   time.Duration // a wait to test Drop with
		wantDrop bool
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"short waits never overload", []step{
			{0, "start", 0, false, false, 20 * ms, false},
			{50 * ms, "start", 4 * ms, false, false, 20 * ms, false},
			{60 * ms, "tick", 0, false, false, 20 * ms, false}, // t=110: min 0
			{50 * ms, "start", 5 * ms, false, false, 0, false},
			{60 * ms, "tick", 0, false, false, 20 * ms, false}, // t=220: min 5ms = target, not above
		}},
		{"min above target for an interval overloads; a good sample after a drain clears", []step{
			{0, "start", 0, false, false, 0, false},
			{100 * ms, "start", 6 * ms, false, false, 0, false}, // closes [0,100): min 0
			{50 * ms, "start", 30 * ms, false, false, 0, false},
			{50 * ms, "tick", 0, false, true, 11 * ms, true}, // t=200: min 6ms > 5ms
			{0, "tick", 0, false, true, 10 * ms, false},      // exactly 2×target is kept
			{50 * ms, "start", 1 * ms, false, true, 11 * ms, true},
			{10 * ms, "drain", 0, false, true, 11 * ms, true},
			{40 * ms, "tick", 0, false, false, 50 * ms, false}, // t=300: min 1ms, queue drained
		}},
		{"hysteresis: fresh starts under LIFO do not clear a standing queue", []step{
			{0, "start", 0, false, false, 0, false},
			{100 * ms, "tick", 20 * ms, true, false, 0, false},
			{100 * ms, "tick", 120 * ms, true, true, 0, false}, // t=200: head waited 120ms
			{50 * ms, "start", 0, false, true, 0, false},       // newest served at once (LIFO)
			{50 * ms, "tick", 8 * ms, true, true, 0, false},    // t=300: min 0, but never drained
			{100 * ms, "tick", 9 * ms, true, true, 0, false},   // t=400: still standing
			{10 * ms, "drain", 0, false, true, 0, false},
			{90 * ms, "tick", 0, false, false, 0, false}, // t=500: drained in [400,500)
		}},
		{"onset: waits above target for a whole interval overload mid-interval", []step{
			{0, "start", 0, false, false, 0, false},
			{130 * ms, "start", 7 * ms, false, false, 0, false}, // streak starts at 130
			{50 * ms, "start", 20 * ms, false, false, 0, false},
			{50 * ms, "start", 40 * ms, false, true, 11 * ms, true}, // t=230: above for 100ms
		}},
		{"a stuck queue overloads without any start", []step{
			{0, "start", 0, false, false, 0, false},
			{100 * ms, "tick", 0, false, false, 0, false},     // t=100: min 0
			{100 * ms, "tick", 40 * ms, true, true, 0, false}, // t=200: no starts, head waited 40ms
			{100 * ms, "tick", 140 * ms, true, true, 11 * ms, true},
		}},
		{"an empty queue at the interval's end is drained: short waits then clear", []step{
			{0, "start", 0, false, false, 0, false},
			{100 * ms, "start", 9 * ms, false, false, 0, false},
			{100 * ms, "tick", 0, false, true, 0, false}, // t=200: min 9ms, queue empty
			{50 * ms, "start", 2 * ms, false, true, 0, false},
			{50 * ms, "tick", 0, false, false, 0, false}, // t=300: min 2ms after a drain
		}},
		{"backlog upstream: the same empty queue is not drained", []step{
			{0, "start", 0, false, false, 0, false},
			{100 * ms, "start", 9 * ms, false, false, 0, false},
			{100 * ms, "tick", 0, false, true, 0, false}, // t=200: min 9ms, queue empty
			{0, "backlog", 0, false, true, 0, false},
			{50 * ms, "start", 2 * ms, false, true, 0, false},
			{50 * ms, "tick", 0, false, true, 11 * ms, true}, // t=300: still overloaded
		}},
		{"idle intervals clear overload", []step{
			{0, "start", 0, false, false, 0, false},
			{100 * ms, "start", 9 * ms, false, false, 0, false},
			{100 * ms, "tick", 0, false, true, 0, false},  // t=200: min 9ms
			{300 * ms, "tick", 0, false, false, 0, false}, // t=500: intervals without samples
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewManual(time.Unix(1000, 0))
			d := &detector{}
			for i, s := range tt.steps {
				clk.Advance(s.advance)
				now := clk.Now()
				switch s.event {
				case "start":
					d.Observe(now, s.wait)
				case "tick":
					d.Advance(now, s.wait, s.queued)
				case "drain":
					d.MarkDrained(now)
				case "backlog":
					d.Backlogged()
				}
				if got := d.Overloaded(); got != s.wantOver {
					t.Fatalf("step %d (%s at +%v): overloaded = %v, want %v", i, s.event, s.advance, got, s.wantOver)
				}
				if got := d.Drop(s.dropAt); got != s.wantDrop {
					t.Fatalf("step %d: Drop(%v) = %v, want %v", i, s.dropAt, got, s.wantDrop)
				}
			}
		})
	}
}

// TestDetectorSince: the start of the standing queue that made the detector
// overloaded (what the episode rule counts from), and the memory of the
// last overload drop.
func TestDetectorSince(t *testing.T) {
	const ms = time.Millisecond
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }

	// Overloaded at an interval's end: since the start of that interval.
	d := &detector{}
	d.Observe(at(0), 0)
	d.Observe(at(100*ms), 9*ms) // closes [0,100): min 0
	d.Observe(at(150*ms), 30*ms)
	if d.Advance(at(200*ms), 0, false); !d.Overloaded() || !d.Since().Equal(at(100*ms)) {
		t.Fatalf("interval end: overloaded %v since %v, want true since +100ms", d.Overloaded(), d.Since().Sub(t0))
	}
	// Staying overloaded does not move it.
	d.Observe(at(250*ms), 40*ms)
	if d.Advance(at(300*ms), 50*ms, true); !d.Since().Equal(at(100 * ms)) {
		t.Fatalf("still overloaded: since %v, want +100ms", d.Since().Sub(t0))
	}

	// The onset rule: since the first wait of the run above target.
	d = &detector{}
	d.Observe(at(0), 0)
	d.Observe(at(110*ms), 0) // [100,200) has a zero wait: not overloaded at its end
	d.Observe(at(150*ms), 7*ms)
	d.Observe(at(210*ms), 20*ms)
	if d.Overloaded() {
		t.Fatal("onset: overloaded at +210ms, before the run above target lasted an interval")
	}
	d.Observe(at(250*ms), 40*ms)
	if !d.Overloaded() || !d.Since().Equal(at(150*ms)) {
		t.Fatalf("onset: overloaded %v since %v, want true since +150ms", d.Overloaded(), d.Since().Sub(t0))
	}

	// A later overload starts its own count.
	d.MarkDrained(at(240 * ms))
	d.Advance(at(300*ms), 0, false) // [200,300): min 20ms, but drained: overloaded by the minimum
	d.Observe(at(310*ms), 0)
	d.MarkDrained(at(320 * ms))
	if d.Advance(at(400*ms), 0, false); d.Overloaded() {
		t.Fatal("still overloaded after a drained interval of short waits")
	}
	d.Advance(at(500*ms), 60*ms, true) // [400,500): nothing started, the head waited 60ms
	if !d.Overloaded() || !d.Since().Equal(at(400*ms)) {
		t.Fatalf("second overload: overloaded %v since %v, want true since +400ms", d.Overloaded(), d.Since().Sub(t0))
	}

	// Dropped and DroppedWithin.
	if d.DroppedWithin(at(500*ms), FloorHold) {
		t.Fatal("DroppedWithin before any drop")
	}
	d.Dropped(at(500 * ms))
	if !d.DroppedWithin(at(500*ms+FloorHold-ms), FloorHold) || d.DroppedWithin(at(500*ms+FloorHold), FloorHold) {
		t.Fatal("DroppedWithin: want true within FloorHold of the drop, false after")
	}
}
