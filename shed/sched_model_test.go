package shed

import (
	"testing"
	"time"
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
//
// Since issue 18's fifth pass (shedisol) the probe remembers a backlog for
// backlogHold as the real one does (heldProbe; the figures above are of
// the plain core, which reports only the instant). With the start turn
// (turn.go) the plain core's 1.25× rows read 62-83 ms (49-51 before it),
// because right after each drain it let granted requests start without a
// yield; with heldProbe they read 34-41 ms against 29-32 ms without the
// turn, 2× 65-78 against 70-83 ms, 6× 37-70 against 43-70 ms, critical
// p99 18-26 against 22-50 ms (docs/shed.md, fifth pass: shedisol).
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
		r := runSchedModel(t, c.load, c.seed, 0)
		if r.goodput < c.minGoodput || r.p99 > c.maxP99 || r.critOK != r.critSent {
			t.Errorf("%.2fx seed %d: goodput %.2f (want ≥ %.2f), p99 %v (want ≤ %v), critical %d/%d",
				c.load, c.seed, r.goodput, c.minGoodput, r.p99, c.maxP99, r.critOK, r.critSent)
		}
	}
}

// TestModelStallAtMildOverload: issue 18's over-shedding round at 1.25×
// (0.72 of capacity with 42.6% shed while the server's share of its core
// was 0.82, once in ten quiet rounds, more often on a loaded machine),
// reproduced in the scheduler model by taking the core away once, for
// 60 or 100 ms at 1.5 s, as another process or a stall of the machine
// does. Before the demand gate looked at the window before (demand.excess),
// seed 2 at 60 ms and seeds 2-4 at 100 ms gave 0.84-0.87 of capacity with
// 30.8-32.9% shed: the requests that waited through the stall made
// sheddable_plus look like excess (52 asked against 51 admitted), a few
// were dropped, and the floor then refused every sheddable request for
// FloorHold (1.6-2.7 s) while the core idled a quarter of the time. Now
// every row keeps 0.96-0.98 with 21.7-22.9% shed (the stall itself costs
// 2-3%). Longer stalls (150 ms) still over-shed in three seeds of four.
func TestModelStallAtMildOverload(t *testing.T) {
	for _, stall := range []time.Duration{60 * time.Millisecond, 100 * time.Millisecond} {
		for seed := uint64(1); seed <= 4; seed++ {
			r := runSchedModel(t, 1.25, seed, stall)
			if r.goodput < 0.95 || r.shed > 0.25 || r.critOK != r.critSent {
				t.Errorf("stall %v, seed %d: goodput %.2f (want ≥ 0.95), shed %.1f%% (want ≤ 25%%), critical %d/%d",
					stall, seed, r.goodput, 100*r.shed, r.critOK, r.critSent)
			}
		}
	}
}

// schedResult is what runSchedModel measured.
type schedResult struct {
	goodput, shed    float64 // 200s within the deadline over capacity; refused or late over offered
	p99              time.Duration
	critOK, critSent int
	critP99          time.Duration
}

// runSchedModel runs the bench's scenario 1 at load × capacity in the
// scheduler model (see TestModelSchedOverload) with the tier mix drawn
// from seed and the probe's memory (heldProbe); stall > 0 takes the core
// away for that long at 1.5 s.
func runSchedModel(t *testing.T, load float64, seed uint64, stall time.Duration) schedResult {
	t.Helper()
	c := stallCase{load: load, seed: seed, heldProbe: true}
	if stall > 0 {
		c.stall, c.stallAt = stall, []time.Duration{1500 * time.Millisecond}
	}
	return runStallModel(t, c)
}
