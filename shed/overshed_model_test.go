package shed

import (
	"cmp"
	"context"
	"math/rand/v2"
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
// run-queue probe reading how many wait for the core (coreQueue), and the
// bench's random tier mix (seeds 1-3). Issue 18's point 3 (at 1.25× only
// the excess should go: goodput ≥ 0.95 of capacity) holds here in every
// seed: 0.99 with 20-21% shed. What reproduced the over-shedding the real
// bench showed in some rounds is tiers arriving in runs (the runs rows): a
// run of sheddable_plus at 1.25× stood in the queue for 150 ms, CoDel
// rightly saw its queue stand and dropped from it, and the floor then
// refused every sheddable request for FloorHold while the core idled: 0.73
// of capacity with 41.6% shed where the excess was 20%. Over any 300 ms the
// tiers above sheddable asked for less than the endpoint served, so none of
// them was excess; the demand gate (demand.go) now drops a tier above the
// lowest only when they do, and all runs rows give 0.99 with 20.7-21.1%
// shed. (A floor that refused on arrival only while the stage was busy,
// work-conserving, was tried before the gate: it fixed the runs row but
// broke strict order, 4 seconds with violations at 2× instead of 1.)
func TestModelRunQueueOverload(t *testing.T) {
	for _, c := range []struct {
		load, minGoodput, maxShed float64
		seed                      uint64
		runs                      int
		poisson                   bool
	}{
		{0.75, 0.74, 0, 1, 0, false},
		// Issue 18: a fresh process at 0.75× with Poisson arrivals sheds
		// nothing (TestModelPoissonShedsNothing has 24 seeds at three
		// loads). Before the episode rule (episode.go) seed 3 shed one
		// request (0.2%, at 1.45 s) and seed 5 twelve (2.2%, at 2.40-2.45
		// s: the adaptive limit had grown to 5 in the calm, so a burst
		// shared the core five ways, the limiter cut to 1 and the queue
		// stood above the target for 300 ms); now seed 5 serves them,
		// its p99 310 ms.
		{0.75, 0.70, 0, 1, 0, true},
		{0.75, 0.70, 0, 2, 0, true},
		{0.75, 0.70, 0, 3, 0, true},
		{0.75, 0.70, 0, 4, 0, true},
		{0.75, 0.70, 0, 5, 0, true},
		{1.25, 0.95, 0.25, 1, 0, false},
		{1.25, 0.95, 0.25, 2, 0, false},
		{1.25, 0.95, 0.25, 3, 0, false},
		{2, 0.95, 0.55, 1, 0, false},
		{6, 0.90, 0.86, 1, 0, false},
		// Tiers in runs (issue 18's over-shedding at 1.25×): with a
		// request every 4 ms, modulo 997 µs sends 8 critical, then 37
		// sheddable_plus, then 37 sheddable requests in a 332 ms cycle
		// (sheddable_plus alone at 1.25× for 150 ms); 499: 62 in 250 ms;
		// 1009: 28 in 112 ms; 401: 40 in 160 ms. Before the demand gate
		// and the floor following the drops, 997 gave 0.73 of capacity
		// with 41.6% shed.
		{1.25, 0.95, 0.25, 1, 997, false},
		{1.25, 0.95, 0.25, 1, 499, false},
		{1.25, 0.95, 0.25, 1, 1009, false},
		{1.25, 0.95, 0.25, 1, 401, false},
		{2, 0.95, 0.55, 1, 997, false},
		{6, 0.90, 0.86, 1, 997, false},
	} {
		synctest.Test(t, func(t *testing.T) {
			r := runQueueModel(t, rqCase{load: c.load, seed: c.seed, runs: c.runs, poisson: c.poisson})
			goodput, shedRate := r.goodput(), r.shedRate()
			t.Logf("runs %d poisson %v seed %d %.2fx: goodput %.2f of capacity, shed %.1f%% (%d in the first second), critical %d/%d, p99 %v",
				c.runs, c.poisson, c.seed, c.load, goodput, 100*shedRate, r.shedFirst, r.critOK, r.critSent, r.p99())
			if goodput < c.minGoodput || shedRate > c.maxShed || r.critOK != r.critSent || (c.poisson && r.shedFirst != 0) {
				t.Errorf("%.2fx: goodput %.2f (want ≥ %.2f), shed %.3f (want ≤ %.3f), %d in the first second (want 0), critical %d/%d",
					c.load, goodput, c.minGoodput, shedRate, c.maxShed, r.shedFirst, r.critOK, r.critSent)
			}
		})
	}
}

// rqCase is one run of the run-queue model (runQueueModel).
type rqCase struct {
	load float64 // offered load over capacity (200/s)
	seed uint64  // the random source's seed (tiers; gaps when poisson)
	// runs: tiers in runs, drawn from the arrival time (µs) modulo this
	// prime instead of at random (0); see TestModelRunQueueOverload.
	runs int
	// poisson: random arrivals (exponential gaps), counted from the fresh
	// Shedder's first request (no warm-up left out).
	poisson bool
	// tier, when set, is every request's tier instead of the mix.
	tier tier.Tier
	// dur is how long requests are sent (default 3.5 s; the first 500 ms
	// at the same load, measured only when poisson).
	dur time.Duration
	// hold, when set, is the Shedder's episodeHold (TestModelEpisodeCurve).
	hold *int
}

// rqResult is what runQueueModel measured.
type rqResult struct {
	secs                          float64 // measured seconds
	n, ok, shed, critSent, critOK int
	shedFirst                     int             // refusals of requests sent in the first second
	firstShed                     time.Duration   // send time of the first refused request, measured or not; -1: none
	firstRefusal                  time.Duration   // when the first refusal was answered; -1: none
	maxQueued                     int             // the most requests waiting in the stage, seen at arrivals
	lat                           []time.Duration // admitted requests' latency from their send time
}

func (r *rqResult) goodput() float64  { return float64(r.ok) / r.secs / 200 }
func (r *rqResult) shedRate() float64 { return float64(r.shed) / float64(r.n) }

func (r *rqResult) p99() time.Duration {
	m := modelResult{lat: r.lat}
	return m.p99()
}

// runQueueModel runs the bench's scenario 1 (or, poisson, scenario 6) in
// virtual time with the queue in front of the stage modelled: one core that
// every request needs, first for refusalCost (read and parse) and, once
// admitted, for its 5 ms handler, in arrival order (a FIFO token), with the
// runtime's run-queue probe reading how many wait for the core (coreQueue).
// Call it inside a synctest bubble.
func runQueueModel(t *testing.T, c rqCase) *rqResult {
	s, _ := newShedder(t, Config{})
	if c.hold != nil {
		s.episodeHold = *c.hold
	}
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
	rng := rand.New(rand.NewPCG(c.seed, 2))
	start := time.Now()
	var mu sync.Mutex
	r := &rqResult{firstShed: -1, firstRefusal: -1}
	var wg sync.WaitGroup
	rate := c.load * 200
	gap := func() time.Duration {
		if c.poisson {
			return time.Duration(rng.ExpFloat64() * float64(time.Second) / rate)
		}
		return time.Duration(float64(time.Second) / rate)
	}
	dur := cmp.Or(c.dur, 3500*time.Millisecond)
	for at := time.Duration(0); at < dur; at += gap() {
		time.Sleep(time.Until(start.Add(at)))
		u := rng.Float64()
		if c.runs > 0 {
			u = float64(int(at/time.Microsecond)%c.runs) / float64(c.runs)
		}
		tr := mixTier(u)
		if c.tier.Valid() {
			tr = c.tier
		}
		measured := c.poisson || at >= 500*time.Millisecond
		r.maxQueued = max(r.maxQueued, int(s.stage("ep").queued.Load()))
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			use(refusalCost)
			tk, err := s.Acquire(ctx, "ep", tr)
			if err == nil {
				use(core.d)
				tk.Release()
			}
			lat := time.Since(start) - at
			mu.Lock()
			defer mu.Unlock()
			if err != nil && (r.firstShed < 0 || at < r.firstShed) {
				r.firstShed = at
			}
			if err != nil && r.firstRefusal < 0 {
				r.firstRefusal = at + lat
			}
			if !measured {
				return
			}
			r.n++
			if tr == tier.Critical {
				r.critSent++
			}
			if err == nil {
				r.ok++
				r.lat = append(r.lat, lat)
				if tr == tier.Critical {
					r.critOK++
				}
				return
			}
			r.shed++
			if at < time.Second {
				r.shedFirst++
			}
		})
	}
	wg.Wait()
	r.secs = (dur - 500*time.Millisecond).Seconds()
	if c.poisson {
		r.secs = dur.Seconds()
	}
	return r
}
