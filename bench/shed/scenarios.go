package shed

import (
	"time"

	"github.com/veerhq/veer/tier"
)

// Scenario is one experiment of the bench.
type Scenario struct {
	Name    string
	Handler HandlerConfig
	// Capacity is "cpu" (the measured capacity of the cpu handler) or
	// "dep" (slots / sleep of the dependency).
	Capacity string
	// Phases returns the load for capacity c (requests per second).
	Phases func(c float64) []Phase
	// ExtraContenders run in this scenario besides the chosen ones (a
	// variant of veer that the scenario is about).
	ExtraContenders []string
}

// StormWorkers is the storm scenario's closed-loop concurrency (hey -c 128).
const StormWorkers = 128

// Scenario 3 (isolation): /crit at IsolationCritRate (0.1 of a 200 rps
// core) alone for IsolationAlone, then beside /bulk at 10× capacity for
// IsolationSpike. Each of the target's two p99s (alone, and after the
// spike's first 500 ms) is taken over 200 critical requests: until issue
// 18's fifth pass the phases were 1.5 s and 3 s, so the "p99" was the
// maximum of 30 and of 50 requests, and the alone one was most often the
// very first request of the run (a new connection in a cold process).
// The bench still reports those first 1.5 s and 3 s beside (extra
// crit_p99_alone_1500ms_ms, crit_p99_after_onset_3s_ms). The critical
// stream records when each request was written (Timed), so that the p99s
// are also reported from the write: the generator shares its core with
// the spike's 10× load and wrote some critical requests 1-4 ms after
// their intended time (issue 18's sixth pass).
const (
	IsolationCritRate = 20
	IsolationAlone    = 10 * time.Second
	IsolationSpike    = 10*time.Second + 500*time.Millisecond
)

// Mix is the tier mix of the overload scenarios: 10% critical (so critical
// load stays ≤ 80% of capacity up to 6× overload), the rest split between
// the two sheddable tiers.
var Mix = []Share{{tier.Critical, 0.10}, {tier.SheddablePlus, 0.45}, {tier.Sheddable, 0.45}}

func one(path string, rate float64, mix []Share) []Stream {
	return []Stream{{Name: "main", Path: path, Rate: rate, Mix: mix}}
}

func overload(k float64) func(c float64) []Phase {
	return func(c float64) []Phase {
		return []Phase{
			{Name: "warm", Dur: time.Second, Streams: one("/a", 0.5*c, Mix)},
			{Name: "overload", Dur: 2500 * time.Millisecond, Streams: one("/a", k*c, Mix), Measure: true},
			{Name: "cool", Dur: 1500 * time.Millisecond, Streams: one("/a", 0.5*c, Mix)},
		}
	}
}

// Scenarios returns the six experiments of issue 5 and the rejection storm
// of issue 18 (7: 128 closed-loop workers that ignore Retry-After, beside
// critical traffic at 0.1× capacity, open loop) for a cpu handler doing
// iters hash rounds per request (light: the overhead scenario's handler).
func Scenarios(iters, lightIters int) []Scenario {
	cpu := HandlerConfig{Kind: "cpu", Iters: iters, Paths: []string{"GET /a"}}
	return []Scenario{
		{Name: "1-overload-1.25x", Handler: cpu, Capacity: "cpu", Phases: overload(1.25)},
		{Name: "1-overload-2x", Handler: cpu, Capacity: "cpu", Phases: overload(2)},
		{Name: "1-overload-6x", Handler: cpu, Capacity: "cpu", Phases: overload(6)},
		{Name: "2-two-callers", Handler: cpu, Capacity: "cpu", Phases: func(c float64) []Phase {
			callers := func(k float64) []Stream {
				return []Stream{
					{Name: "trips", Path: "/a", Caller: "trips", Rate: k * c, Mix: []Share{{tier.Critical, 1}}},
					{Name: "batch", Path: "/a", Caller: "batch", Rate: k * c, Mix: []Share{{tier.SheddablePlus, 1}}},
				}
			}
			return []Phase{
				{Name: "warm", Dur: time.Second, Streams: callers(0.25)},
				{Name: "load", Dur: 3 * time.Second, Streams: callers(0.6), Measure: true},
			}
		}},
		{Name: "3-isolation", Handler: HandlerConfig{Kind: "cpu", Iters: iters, Paths: []string{"GET /crit", "GET /bulk"}}, Capacity: "cpu",
			Phases: func(c float64) []Phase {
				crit := Stream{Name: "crit", Path: "/crit", Rate: IsolationCritRate, Mix: []Share{{tier.Critical, 1}}, Timed: true}
				bulk := Stream{Name: "bulk", Path: "/bulk", Rate: 10 * c, Mix: []Share{{tier.SheddablePlus, 1}}}
				return []Phase{
					{Name: "alone", Dur: IsolationAlone, Streams: []Stream{crit}},
					{Name: "spike", Dur: IsolationSpike, Streams: []Stream{crit, bulk}, Measure: true},
				}
			}},
		{Name: "4-overhead-5x100rps", Handler: HandlerConfig{Kind: "cpu", Iters: lightIters, Paths: []string{"GET /e0", "GET /e1", "GET /e2", "GET /e3", "GET /e4"}},
			Capacity: "cpu", Phases: func(float64) []Phase {
				var ss []Stream
				for _, p := range []string{"/e0", "/e1", "/e2", "/e3", "/e4"} {
					ss = append(ss, Stream{Name: p, Path: p, Rate: 100, Mix: Mix})
				}
				// A warm second before the measured five: the overhead is
				// the per-request cost at 5 × 100 rps, not the process's
				// start (see shedbench's overhead).
				return []Phase{
					{Name: "warm", Dur: time.Second, Streams: ss},
					{Name: "steady", Dur: 5 * time.Second, Streams: ss, Measure: true},
				}
			}},
		{Name: "5-slow-dependency-2x", Handler: HandlerConfig{Kind: "dep", Slots: 20, Sleep: 20 * time.Millisecond, Paths: []string{"GET /a"}},
			Capacity: "dep", Phases: overload(2)},
		{Name: "6-random-arrivals-0.75x", Handler: cpu, Capacity: "cpu", Phases: func(c float64) []Phase {
			s := one("/a", 0.75*c, Mix)
			s[0].Poisson = true
			return []Phase{
				{Name: "warm", Dur: 500 * time.Millisecond, Streams: s},
				{Name: "steady", Dur: 4 * time.Second, Streams: s, Measure: true},
			}
		}},
		{Name: "7-storm-closed-128", Handler: cpu, Capacity: "cpu", ExtraContenders: []string{"veer-hold"},
			Phases: func(c float64) []Phase {
				crit := Stream{Name: "crit", Path: "/a", Rate: 0.1 * c, Mix: []Share{{tier.Critical, 1}}}
				storm := Stream{Name: "storm", Path: "/a", Workers: StormWorkers, Mix: []Share{{tier.SheddablePlus, 1}}}
				return []Phase{
					{Name: "warm", Dur: time.Second, Streams: one("/a", 0.5*c, Mix)},
					{Name: "storm", Dur: 3 * time.Second, Streams: []Stream{crit, storm}, Measure: true},
				}
			}},
	}
}
