package shed

import (
	"net/http"
	"testing"
	"time"

	"github.com/veerhq/veer/tier"
)

// TestAnalyzeOrderViolations: a second in which a sheddable_plus request
// was shed while a sheddable one was admitted is a violation; the extra
// order_viol_after_onset leaves out the seconds that hold the measured
// phase's first OnsetWindow, and seconds with only one of the two events
// are not violations.
func TestAnalyzeOrderViolations(t *testing.T) {
	phases := []Phase{{Name: "warm", Dur: time.Second}, {Name: "load", Dur: 3 * time.Second, Measure: true}}
	at := func(ms int, tr tier.Tier, status int) Sample {
		return Sample{Phase: 1, Tier: tr, At: time.Duration(ms) * time.Millisecond, Status: status, Latency: time.Millisecond}
	}
	samples := []Sample{
		at(1003, tier.Sheddable, http.StatusOK), // onset second: violation
		at(1200, tier.SheddablePlus, http.StatusServiceUnavailable),
		at(2100, tier.SheddablePlus, http.StatusServiceUnavailable), // shed only: fine
		at(3100, tier.Sheddable, http.StatusOK),                     // later second: violation
		at(3900, tier.SheddablePlus, http.StatusServiceUnavailable),
	}
	r := Analyze(phases, samples)
	if r.OrderViolations != 2 || r.Extra["order_viol_after_onset"] != 1 {
		t.Fatalf("violations %d, after onset %v; want 2 and 1", r.OrderViolations, r.Extra["order_viol_after_onset"])
	}
}

// TestAnalyzeWarmSheds: requests shed before the measured phase (a fresh
// process at its warm-up load) are counted apart, not in the shed rate.
func TestAnalyzeWarmSheds(t *testing.T) {
	phases := []Phase{{Name: "warm", Dur: time.Second}, {Name: "load", Dur: time.Second, Measure: true}, {Name: "cool", Dur: time.Second}}
	samples := []Sample{
		{Phase: 0, Tier: tier.Sheddable, At: 10 * time.Millisecond, Status: http.StatusServiceUnavailable},
		{Phase: 0, Tier: tier.Sheddable, At: 20 * time.Millisecond, Status: http.StatusOK},
		{Phase: 1, Tier: tier.Sheddable, At: 1100 * time.Millisecond, Status: http.StatusServiceUnavailable},
		{Phase: 2, Tier: tier.Sheddable, At: 2100 * time.Millisecond, Status: http.StatusServiceUnavailable},
	}
	r := Analyze(phases, samples)
	if r.Extra["warm_sheds"] != 1 || r.ShedRate != 1 {
		t.Fatalf("warm sheds %v, shed rate %v; want 1 and 1", r.Extra["warm_sheds"], r.ShedRate)
	}
}

// TestAnalyzeGoodputByCompletion: goodput counts the 200s that completed
// in the measured phase, whenever they were sent; the by-send figure counts
// the 200s of requests sent in it. A backlog worked off after the phase
// (the 0.5x recovery) raises only the by-send figure.
func TestAnalyzeGoodputByCompletion(t *testing.T) {
	phases := []Phase{{Name: "warm", Dur: time.Second}, {Name: "load", Dur: time.Second, Measure: true}, {Name: "cool", Dur: time.Second}}
	ms := func(v int) time.Duration { return time.Duration(v) * time.Millisecond }
	samples := []Sample{
		{Phase: 0, At: ms(950), Latency: ms(100), Status: http.StatusOK},  // sent before, done in: counts
		{Phase: 1, At: ms(1100), Latency: ms(10), Status: http.StatusOK},  // sent and done in: counts
		{Phase: 1, At: ms(1500), Latency: ms(600), Status: http.StatusOK}, // done after: by send only
		{Phase: 1, At: ms(1600), Latency: ms(5), Status: http.StatusServiceUnavailable},
		{Phase: 1, At: ms(1700), Latency: ms(5), Status: 0},
	}
	r := Analyze(phases, samples)
	if r.Goodput != 2 || r.GoodputBySend != 2 {
		t.Fatalf("goodput %v, by send %v; want 2 and 2", r.Goodput, r.GoodputBySend)
	}
	samples[0].Latency = ms(10) // now done before the phase
	samples = append(samples, Sample{Phase: 1, At: ms(1800), Latency: ms(400), Status: http.StatusOK})
	r = Analyze(phases, samples)
	if r.Goodput != 1 || r.GoodputBySend != 3 {
		t.Fatalf("goodput %v, by send %v; want 1 and 3", r.Goodput, r.GoodputBySend)
	}
}
