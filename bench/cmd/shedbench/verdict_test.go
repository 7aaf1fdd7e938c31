package main

import (
	"strings"
	"testing"

	bench "github.com/veerhq/veer/bench/shed"
)

// TestVerdicts: a target is met only when every round of veer meets it,
// other contenders are not judged, and overhead is judged against the
// same round's none, whose goodput is printed beside veer's where the
// figure is a goodput.
func TestVerdicts(t *testing.T) {
	r := func(sc, c string, round int, good, p99 float64, extra map[string]float64) bench.Result {
		if extra == nil {
			extra = map[string]float64{}
		}
		return bench.Result{Scenario: sc, Contender: c, Round: round, CapacityRPS: 100, Goodput: good, P99Ms: p99,
			Success: map[string]float64{"critical": 1}, Extra: extra}
	}
	all := []bench.Result{
		r("1-overload-6x", "veer", 0, 95, 80, nil),
		r("1-overload-6x", "veer", 1, 95, 120, nil),
		r("1-overload-6x", "none", 0, 10, 900, nil),
		r("1-overload-2x", "veer", 0, 95, 50, nil),
		r("4-overhead-5x100rps", "none", 0, 0, 1, nil),
		r("4-overhead-5x100rps", "veer", 0, 0, 1, nil),
		r("4-overhead-5x100rps", "none", 1, 0, 1, nil),
		r("4-overhead-5x100rps", "veer", 1, 0, 1, nil),
		r("1-overload-2x", "none", 1, 80, 900, nil), // another round's none is not veer's baseline
		r("1-overload-1.25x", "none", 0, 94, 800, nil),
		r("1-overload-1.25x", "veer", 0, 94.9, 60, nil),
	}
	// The target reads the measured phase's CPU; the whole-life figure
	// (the definition before the fifth pass) is printed beside it.
	phase := func(i int, ms, life float64) {
		all[i].Extra["phase_cpu_ms"], all[i].Extra["phase_s"], all[i].CPUCorePct = ms, 5, life
	}
	phase(4, 500, 10)
	phase(5, 525, 13) // round 0: +0.5 in the phase (25 ms in 5 s), +3 whole life
	phase(6, 500, 20)
	phase(7, 600, 20.5) // round 1: +2 in the phase, +0.5 whole life
	overhead(all)
	var b strings.Builder
	verdicts(&b, all)
	out := b.String()
	for _, want := range []string{
		"MISSED 1/2  p99 of admitted <= 100 ms at 6x: 80ms, 120ms",
		"MET    2/2  goodput >= 0.90 of capacity at 6x: 0.95 (none 0.10), 0.95\n",
		"MET    1/1  goodput >= 0.90 of capacity at 2x: 0.95\n",
		"MISSED 0/1  1.25x (issue 18): goodput >= 0.95, p99 <= 100 ms: 0.95/60ms (none 0.94)\n",
		"MISSED 1/2  overhead <= 1% of a core at 5 x 100 rps: +0.5% (whole life +3.0%), +2.0% (whole life +0.5%)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("verdicts lack %q:\n%s", want, out)
		}
	}
}
