package shed

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/veerhq/veer/tier"
)

// refusalCost is the modelled CPU of reading, parsing and answering one
// request that is refused: the ~35 µs of server CPU per 503 measured on a
// real server (`shedbench rejectcost`, docs/shed.md).
const refusalCost = 35 * time.Microsecond

// TestModelRejectionStorm is issue 18's storm in virtual time: one core
// (5 ms CPU handlers, capacity 200/s); every request first costs the core
// refusalCost to read and parse (a refused one is also written in that
// time); 128 closed-loop clients of the default tier send their next
// request as soon as the last one is answered, ignoring Retry-After;
// critical requests arrive open loop at 20/s. Answered at once, the
// refusals' parsing competes for the core with the handlers; held in the
// storm, the clients slow down: fewer than half the refusals per second,
// and more goodput. (The model has no scheduler, poller or system calls,
// which on the real server made the refusals cost far more: the issue
// measured 0.49× with hey -c 128; here answering at once still keeps
// 0.88×, so this checks the mechanism, not the real magnitude: see the
// bench in docs/shed.md.) Critical requests are all served either way.
func TestModelRejectionStorm(t *testing.T) {
	got := map[string]stormResult{}
	for _, c := range []struct {
		name      string
		hold      time.Duration
		min       float64 // goodput over capacity
		maxCrit99 time.Duration
	}{
		{"held", StormRejectHold, 0.85, 100 * time.Millisecond},
		{"zero config", 0, 0.85, 100 * time.Millisecond},
		{"at once", -1, 0.5, 100 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runStormModel(t, stormModel{hold: c.hold})
			got[c.name] = r
			if r.goodput < c.min {
				t.Errorf("goodput %.2f of capacity, want ≥ %.2f", r.goodput, c.min)
			}
			if r.critFailed != 0 || r.critP99() > c.maxCrit99 {
				t.Errorf("critical: %d failed, p99 %v, want 0 and ≤ %v", r.critFailed, r.critP99(), c.maxCrit99)
			}
		})
	}
	held, once := got["held"], got["at once"]
	if 2*held.refusals > once.refusals || held.goodput <= once.goodput {
		t.Errorf("held: %.2f of capacity at %.0f refusals/s; at once: %.2f at %.0f/s; want fewer than half the refusals and more goodput",
			held.goodput, held.refusals, once.goodput, once.refusals)
	}
}

// stormModel is one run of the storm model (runStormModel).
type stormModel struct {
	hold time.Duration // Config.RejectHold
	// warmMix: the bench's scenario 7 as it runs, 1 s of the usual tier
	// mix at half the capacity before the storm (the stage enters the
	// storm with the limit and state that load left), instead of 500 ms
	// of the storm itself.
	warmMix bool
	// yield models the Go scheduler as the stage meets it (modelCore's
	// sched) and the run-queue yield (modelCore.yield), instead of a core
	// served in arrival order and a yield that does nothing.
	yield bool
}

// stormResult is what runStormModel measured in the storm's 3 s.
type stormResult struct {
	goodput, refusals float64 // 200s over capacity; refusals per second
	crit              []time.Duration
	critFailed        int
}

func (r stormResult) critP99() time.Duration {
	m := modelResult{lat: r.crit}
	return m.p99()
}

// runStormModel runs the storm of TestModelRejectionStorm in a synctest
// bubble and returns its figures.
func runStormModel(t *testing.T, m stormModel) stormResult {
	t.Helper()
	var res stormResult
	synctest.Test(t, func(t *testing.T) {
		s, _ := newShedder(t, Config{RejectHold: m.hold})
		core := newModelCore(m.yield)
		s.rq, s.yield = core, func() {}
		if m.yield {
			s.yield, s.settle = core.yield, func() {}
		}
		warm, dur := 500*time.Millisecond, 3*time.Second
		if m.warmMix {
			warm = time.Second
		}
		start := time.Now()
		measuring := func() bool { d := time.Since(start); return d >= warm && d < warm+dur }
		var ok, refused atomic.Int64
		var mu sync.Mutex
		// Each storm client has its connection; every other request has
		// its own (the bench's critical stream has its own pool). The
		// refusals are held as Middleware holds an HTTP/1.1 refusal.
		var conns atomic.Int64
		one := func(ctx context.Context, tr tier.Tier, conn string) (admitted bool) {
			if conn == "" {
				conn = fmt.Sprintf("other-%d", conns.Add(1))
			}
			core.use(refusalCost)
			p := s.pol.Load()
			s.markConn(p, tr, conn)
			tk, err := s.Acquire(ctx, "ep", tr)
			if err != nil {
				s.holdConn(ctx, s.stage("ep"), p, 1, conn)
				return false
			}
			core.useNext(modelHandler)
			tk.Release()
			return true
		}
		var wg sync.WaitGroup
		for i := range 128 {
			conn := fmt.Sprintf("storm-%d", i)
			wg.Go(func() {
				if m.warmMix {
					time.Sleep(warm)
				}
				for time.Since(start) < warm+dur {
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					meas := measuring()
					admitted := one(ctx, tier.SheddablePlus, conn)
					cancel()
					if !meas {
						continue
					}
					if admitted {
						ok.Add(1)
					} else {
						refused.Add(1)
					}
				}
			})
		}
		if m.warmMix { // the bench's mix at 0.5×: every 10 ms, one in ten critical
			for i := 0; i < 100; i++ {
				time.Sleep(time.Until(start.Add(time.Duration(i) * 10 * time.Millisecond)))
				tr := tier.Sheddable
				switch {
				case i%10 == 0:
					tr = tier.Critical
				case i%2 == 1:
					tr = tier.SheddablePlus
				}
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					defer cancel()
					one(ctx, tr, "")
				})
			}
		}
		critFrom := 50 * time.Millisecond
		if m.warmMix {
			critFrom += warm
		}
		for at := critFrom; at < warm+dur; at += 50 * time.Millisecond {
			time.Sleep(time.Until(start.Add(at)))
			meas := measuring()
			wg.Go(func() {
				sent := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				admitted := one(ctx, tier.Critical, "")
				if !meas {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if !admitted {
					res.critFailed++
					return
				}
				ok.Add(1)
				res.crit = append(res.crit, time.Since(sent))
			})
		}
		wg.Wait()
		res.goodput = float64(ok.Load()) / dur.Seconds() / 200
		res.refusals = float64(refused.Load()) / dur.Seconds()
		t.Logf("goodput %.2f of capacity, %d refusals/s, critical p99 %v (max %v), %d critical failed",
			res.goodput, int(res.refusals), res.critP99(), slices.Max(res.crit), res.critFailed)
	})
	return res
}

// modelHandler is the CPU of one admitted request in the storm model.
const modelHandler = 5 * time.Millisecond

// coreQueue is the model's run queue: busy and saturated while more than
// two requests wait for the core.
type coreQueue struct{ waiting atomic.Int64 }

func (q *coreQueue) Observe(time.Time) {}
func (q *coreQueue) Busy() bool        { return q.waiting.Load() > 2 }
func (q *coreQueue) Saturated() bool   { return q.Busy() }

// TestModelStormOnset: critical requests in the bench's storm (scenario
// 7: 1 s of the usual mix at half the capacity, then 128 closed-loop
// sheddable_plus clients beside critical requests at 20/s) with the Go
// scheduler and the run-queue yield modelled (modelCore). Traced real
// rounds put the slowest critical request at the storm's onset: 20-26 ms
// in the run queue before the middleware (the storm's first 128 requests
// parsed first), 17-31 ms in the stage queue (the limit still 4 from the
// calm, four CPU-bound handlers sharing the core) and 17-19 ms in its own
// yield after it got its slot (parked until the run queue drained, behind
// those handlers). The model has the same shape: its p99 (the largest of
// 59) is the onset's request, 45 ms (15 ms parsing, 25 ms from the stage
// to its handler), 20-28 ms later in the storm. Letting tiers that are
// never shed skip the yield gave 24.9-29.1 ms here and was not kept: it
// cost the 6× overload more (TestModelSchedOverload). This bounds today's
// figure.
func TestModelStormOnset(t *testing.T) {
	r := runStormModel(t, stormModel{warmMix: true, yield: true})
	if r.critFailed != 0 || r.critP99() > 50*time.Millisecond {
		t.Errorf("critical: %d failed, p99 %v; want 0 and ≤ 50 ms", r.critFailed, r.critP99())
	}
	if r.goodput < 0.8 {
		t.Errorf("goodput %.2f of capacity, want ≥ 0.80", r.goodput)
	}
}
