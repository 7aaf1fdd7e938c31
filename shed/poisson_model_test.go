package shed

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/veerhq/veer/tier"
)

// TestModelPoissonShedsNothing is issue 18's "a fresh process at 0.75×
// Poisson load sheds 0", as a table over seeds: the run-queue model
// (runQueueModel: one core, 5 ms handlers, the bench's tier mix, requests
// counted from the fresh Shedder's first) at 0.6×, 0.75× and 0.8× of
// capacity with exponential gaps, seeds 1-24, sheds nothing. Before the
// episode rule (episode.go) 1, 8 and 11 of these 24 seeds shed (0.75×: seeds
// 3, 5, 6, 7, 8, 11, 14, 22; 0.2-2.2% of their requests), each in a burst
// of the arrivals that drained by itself. What it costs is logged: the
// requests those bursts used to shed are served late.
//
// 0.8× is the margin above the target, and there a seed may shed a few
// requests (at most 2 of the 24 seeds, at most 0.5% of their requests):
// until issue 18's seventh pass none did, but only because the limiter took
// the CPU for a slow dependency in some bursts (a cut under saturated
// processors judged on a window that looked unsaturated), re-baselined and
// doubled the limit, so that later bursts waited as handlers in flight,
// where nothing is shed, instead of in the stage. Seed 7 now sheds 2 of 602
// requests at 3.44 s.
func TestModelPoissonShedsNothing(t *testing.T) {
	for _, c := range []struct {
		load     float64
		maxSeeds int     // seeds that may shed
		maxShare float64 // of their requests
	}{{0.6, 0, 0}, {0.75, 0, 0}, {0.8, 2, 0.005}} {
		load := c.load
		var shedSeeds []uint64
		var worst, p99s []time.Duration
		for seed := uint64(1); seed <= 24; seed++ {
			t.Run(fmt.Sprintf("%gx/seed_%d", load, seed), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					r := runQueueModel(t, rqCase{load: load, seed: seed, poisson: true})
					if r.shed > 0 {
						shedSeeds = append(shedSeeds, seed)
						t.Logf("%.2fx seed %d: %d of %d requests shed, the first sent at %v", load, seed, r.shed, r.n, r.firstShed)
						if share := float64(r.shed) / float64(r.n); c.maxSeeds == 0 || share > c.maxShare {
							t.Errorf("%.2fx seed %d: %.2f%% of the requests shed, want at most %.1f%%", load, seed, 100*share, 100*c.maxShare)
						}
					}
					p99s = append(p99s, r.p99())
					worst = append(worst, slices.Max(r.lat))
				})
			})
		}
		if len(shedSeeds) > c.maxSeeds {
			t.Errorf("%.2fx: %d of 24 seeds shed %v, want at most %d", load, len(shedSeeds), shedSeeds, c.maxSeeds)
		}
		slices.Sort(p99s)
		t.Logf("%.2fx: %d of 24 seeds shed %v; p99 median %v, worst %v; slowest admitted %v",
			load, len(shedSeeds), shedSeeds, p99s[12].Round(time.Millisecond), p99s[23].Round(time.Millisecond), slices.Max(worst).Round(time.Millisecond))
	}
}

// TestModelEpisodeOnset bounds what the episode rule may cost at the onset
// of a real overload in a fresh process (the run-queue model from its first
// request). A mixed load at 2× and 6×: the tiers above sheddable alone ask
// for more than the endpoint serves, which confirms the episode at once, so
// goodput and p99 stay as before. One tier at 6× and 10× (a user's default
// tier, scenario 3's /bulk): nothing above it to tell, so the queued work
// (episodeWork) confirms it; without that the queue held 600 ms of arrivals
// (hundreds of requests) before the first drop.
func TestModelEpisodeOnset(t *testing.T) {
	for _, c := range []struct {
		rqCase
		minGoodput float64
		maxP99     time.Duration
		maxQueued  int
		firstBy    time.Duration // the first refusal was answered by then
	}{
		{rqCase{load: 2, seed: 1, poisson: true}, 0.95, 100 * time.Millisecond, 100, 250 * time.Millisecond},
		{rqCase{load: 6, seed: 1, poisson: true}, 0.95, 100 * time.Millisecond, 400, 250 * time.Millisecond},
		{rqCase{load: 6, seed: 1, tier: tier.SheddablePlus}, 0.95, 100 * time.Millisecond, 400, 250 * time.Millisecond},
		{rqCase{load: 10, seed: 1, tier: tier.SheddablePlus}, 0.9, 100 * time.Millisecond, 400, 250 * time.Millisecond},
	} {
		name := fmt.Sprintf("%gx poisson %v tier %v", c.load, c.poisson, c.tier)
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := runQueueModel(t, c.rqCase)
				t.Logf("%.0fx poisson %v tier %v: goodput %.2f, shed %.1f%%, p99 %v, at most %d queued, first refusal at %v",
					c.load, c.poisson, c.tier, r.goodput(), 100*r.shedRate(), r.p99(), r.maxQueued, r.firstRefusal)
				if r.goodput() < c.minGoodput || r.p99() > c.maxP99 || r.maxQueued > c.maxQueued || r.firstRefusal < 0 || r.firstRefusal > c.firstBy {
					t.Errorf("%.0fx poisson %v tier %v: goodput %.2f (want ≥ %.2f), p99 %v (want ≤ %v), %d queued (want ≤ %d), first refusal at %v (want by %v)",
						c.load, c.poisson, c.tier, r.goodput(), c.minGoodput, r.p99(), c.maxP99, r.maxQueued, c.maxQueued, r.firstRefusal, c.firstBy)
				}
			})
		})
	}
}

// TestModelEpisodeCurve prints the episode rule's trade-off in the model,
// one line per episodeHold: seeds (of 100) that shed at 0.75×, 0.8× and
// 0.85× Poisson with the worst seed's p99 and the slowest admitted request
// at 0.75×, and the p99 of fresh-process Poisson onsets at 1.1×, 1.25×, 2×
// and 6× (24 seeds: median/worst, seeds above 100 ms). It checks only that
// the landed hold sheds in no seed at 0.75× and 0.8×; it takes 12-30 s, so
// it runs only when asked:
//
//	SHED_EPISODE_CURVE=1 go test -run TestModelEpisodeCurve -v ./shed
func TestModelEpisodeCurve(t *testing.T) {
	if os.Getenv("SHED_EPISODE_CURVE") == "" {
		t.Skip("a long measurement: SHED_EPISODE_CURVE=1 runs it")
	}
	const saved = episodeHold
	for _, hold := range []int{0, 3, 4, 5, 6, 7, 10} {
		line := fmt.Sprintf("hold %d intervals:", hold)
		for _, load := range []float64{0.75, 0.8, 0.85} {
			shed := 0
			var p99s, slowest []time.Duration
			for seed := uint64(1); seed <= 100; seed++ {
				synctest.Test(t, func(t *testing.T) {
					r := runQueueModel(t, rqCase{load: load, seed: seed, poisson: true, hold: &hold})
					if r.shed > 0 {
						shed++
					}
					p99s = append(p99s, r.p99())
					slowest = append(slowest, slices.Max(r.lat))
				})
			}
			if hold == saved && load < 0.85 && shed > 0 {
				t.Errorf("the landed hold (%d intervals): %d of 100 seeds shed at %.2fx; want none", hold, shed, load)
			}
			line += fmt.Sprintf(" %.2fx %d/100 shed", load, shed)
			if load == 0.75 {
				line += fmt.Sprintf(" (worst p99 %v, slowest %v)", slices.Max(p99s).Round(time.Millisecond), slices.Max(slowest).Round(time.Millisecond))
			}
			line += ";"
		}
		for _, load := range []float64{1.1, 1.25, 2, 6} {
			var p99s []time.Duration
			over := 0
			for seed := uint64(1); seed <= 24; seed++ {
				synctest.Test(t, func(t *testing.T) {
					r := runQueueModel(t, rqCase{load: load, seed: seed, poisson: true, hold: &hold})
					p99s = append(p99s, r.p99())
					if r.p99() > 100*time.Millisecond {
						over++
					}
				})
			}
			slices.Sort(p99s)
			line += fmt.Sprintf(" %gx onset p99 %v/%v (%d > 100 ms);", load, p99s[12].Round(time.Millisecond), p99s[23].Round(time.Millisecond), over)
		}
		t.Log(line)
	}
}
