package shed

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/internal/metrictest"
	"github.com/veerhq/veer/tier"
)

// TestRejectionStormIsPaced, in virtual time: an endpoint sheds the
// sheddable tier on arrival. Its first refusals are answered at once; once
// an interval has refused more than it admitted (at least
// stormMinRejects), a refusal is held between 7/8 of RejectHold and
// RejectHold; a held refusal ends when its client leaves; beyond MaxHeld
// refusals are answered at once; with a negative RejectHold never held.
// By default (zero) an HTTP/1.x refusal is held for StormRejectHold, an
// HTTP/2 one is not, nor one on a connection (remote address) that has
// carried a critical request, nor one through Hold.
func TestRejectionStormIsPaced(t *testing.T) {
	for _, c := range []struct {
		name     string
		hold     time.Duration
		min, max time.Duration // of a refusal in the storm
		proto    int           // HTTP major version of the refusals (1 when 0)
		critConn bool          // the refusals come on the critical request's connection
	}{
		{"100ms", StormRejectHold, StormRejectHold * 7 / 8, StormRejectHold, 0, false},
		{"200ms", 200 * time.Millisecond, 175 * time.Millisecond, 200 * time.Millisecond, 0, false},
		{"100ms, HTTP/2", StormRejectHold, StormRejectHold * 7 / 8, StormRejectHold, 2, false},
		{"100ms, on a critical connection", StormRejectHold, 0, 0, 0, true},
		{"default: 100ms", 0, StormRejectHold * 7 / 8, StormRejectHold, 0, false},
		{"default, HTTP/2: at once", 0, 0, 0, 2, false},
		{"default, on a critical connection: at once", 0, 0, 0, 0, true},
		{"negative: off", -1, 0, 0, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, reg := newShedder(t, Config{Limit: LimitConfig{Static: 1}, RejectHold: c.hold})
				s.rq = nil
				release := make(chan struct{})
				defer close(release)
				h := s.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path == "/hold" {
						<-release
					}
				}))
				var conns atomic.Int64 // each request on its own connection, unless critConn
				do := func(ctx context.Context, tr tier.Tier) (int, time.Duration) {
					start := time.Now()
					rec := httptest.NewRecorder()
					req := httptest.NewRequestWithContext(ctx, http.MethodGet, "http://x/hold", nil)
					req.Header.Set(tier.Header, tr.String())
					req.RemoteAddr = fmt.Sprintf("192.0.2.1:%d", 1000+conns.Add(1))
					if c.critConn {
						req.RemoteAddr = "192.0.2.1:1"
					}
					if c.proto == 2 && tr != tier.Critical {
						req.ProtoMajor, req.ProtoMinor, req.Proto = 2, 0, "HTTP/2.0"
					}
					h.ServeHTTP(rec, req)
					return rec.Code, time.Since(start)
				}
				ctx := context.Background()
				go do(ctx, tier.Critical) // holds the only slot
				synctest.Wait()
				for range 3 {
					go do(ctx, tier.SheddablePlus) // queued, dropped at the overload
				}
				time.Sleep(210 * time.Millisecond)
				synctest.Wait()
				// The floor now refuses sheddable on arrival; not yet a storm.
				for i := range 2 * stormMinRejects {
					if code, took := do(ctx, tier.Sheddable); code != http.StatusServiceUnavailable || took != 0 {
						t.Fatalf("refusal %d before the storm: %d after %v, want 503 at once", i, code, took)
					}
				}
				time.Sleep(DefaultInterval) // the interval ends: it refused 20, admitted 0
				if c.hold == 0 {
					// The default holds in a deep storm: two such intervals
					// in a row (TestDeepStorm). The first interval's refusals
					// are answered at once.
					for i := range 2 * stormMinRejects {
						if code, took := do(ctx, tier.Sheddable); code != http.StatusServiceUnavailable || took != 0 {
							t.Fatalf("refusal %d in a storm not yet deep: %d after %v, want 503 at once", i, code, took)
						}
					}
					time.Sleep(DefaultInterval)
				}
				// Ten clients retry at once; the last leaves after 1 ms.
				took := make([]time.Duration, 10)
				cctx, cancel := context.WithCancel(ctx)
				for i := range took {
					go func() {
						rctx := ctx
						if i == len(took)-1 {
							rctx = cctx
						}
						code, d := do(rctx, tier.Sheddable)
						if code != http.StatusServiceUnavailable {
							t.Errorf("refusal in the storm: %d", code)
						}
						took[i] = d
					}()
				}
				time.Sleep(time.Millisecond)
				cancel()
				time.Sleep(c.max + time.Millisecond)
				synctest.Wait()
				for i, d := range took[:len(took)-1] {
					if d < c.min || d > c.max {
						t.Errorf("refusal %d in the storm answered after %v, want %v..%v", i, d, c.min, c.max)
					}
				}
				if want := min(c.max, time.Millisecond); took[len(took)-1] != want {
					t.Errorf("held refusal of a client that left after 1ms ended after %v, want %v", took[len(took)-1], want)
				}
				wantHeld := 0.0
				if c.max > 0 {
					wantHeld = float64(len(took))
				}
				if got := metrictest.Sum(t, reg, "veer_shed_held_refusals_total", map[string]string{"endpoint": "/hold"}); got != wantHeld {
					t.Errorf("veer_shed_held_refusals_total %v, want %v", got, wantHeld)
				}
				if c.hold == 0 { // default: Hold (gRPC) does not hold
					t0 := time.Now()
					if s.Hold(ctx, "/hold"); time.Since(t0) != 0 {
						t.Fatalf("Hold in the storm with the default RejectHold took %v, want at once", time.Since(t0))
					}
				}
				if c.hold <= 0 {
					return
				}
				// Adapters hold through Hold (an unknown endpoint: at once).
				t0 := time.Now()
				s.Hold(ctx, "nowhere")
				if time.Since(t0) != 0 {
					t.Fatalf("Hold of an unknown endpoint took %v", time.Since(t0))
				}
				s.Hold(ctx, "/hold")                                   // no route pattern: the endpoint is the path
				if d := time.Since(t0); d < c.hold*7/8 || d > c.hold { // no connection to tell: held
					t.Fatalf("Hold in the storm took %v, want %v..%v", d, c.hold*7/8, c.hold)
				}
				// Beyond MaxHeld, at once.
				if c.max == 0 {
					return
				}
				s.held.Store(MaxHeld)
				if code, took := do(ctx, tier.Sheddable); code != http.StatusServiceUnavailable || took != 0 {
					t.Fatalf("refusal beyond MaxHeld: %d after %v, want at once", code, took)
				}
				s.held.Store(0)
			})
		})
	}
}

// TestDeepStorm: the default hold begins only when two intervals in a row
// refuse stormDeepRatio × their admissions (a closed-loop storm), not at an
// open-loop overload that refuses a few times what it admits (2×, 6×), nor
// after one interval in which the processor was taken away; once begun it
// lasts while the storm does and stormDeepLinger intervals more. Step
// table over intervals on a manual clock.
func TestDeepStorm(t *testing.T) {
	clk := clock.NewManual(time.Unix(1e9, 0))
	s, _ := newShedder(t, Config{Limit: LimitConfig{Static: 1000}, Clock: clk})
	s.rq = nil
	if tk, err := s.Acquire(context.Background(), "ep", tier.Critical); err == nil {
		tk.Release()
	}
	st := s.lookup("ep")
	tick := func() {
		clk.Advance(DefaultInterval)
		st.mu.Lock()
		st.tickLocked(clk.Now(), s.pol.Load())
		st.mu.Unlock()
	}
	tick()
	type step struct {
		refused, admitted int
		storm, deep       bool
	}
	steps := []step{
		{50, 10, true, false},  // 6×: 83% refused, a storm but not deep
		{10, 10, true, false},  // 2×: a storm still (it ends when refusals fall below half the admissions)
		{130, 10, true, false}, // 13×, once (a stall, an overload's first interval): not deep
		{50, 10, true, false},
		{119, 10, true, false}, // just under 12×
		{120, 10, true, false}, // 12×, the first time
		{120, 10, true, true},  // 12× twice in a row: deep
		{40, 10, true, true},   // held refusals come back slower: still deep while a storm
		{4, 10, false, true},   // the storm ends (every client held): deep lingers
	}
	for range stormDeepLinger - 2 {
		steps = append(steps, step{0, 10, false, true})
	}
	steps = append(steps,
		step{0, 10, false, false}, // stormDeepLinger intervals without a storm: over
		step{50, 10, true, false}, // a new storm starts shallow again
		step{20, 0, true, false},  // nothing admitted: refusals alone decide, once...
		step{20, 0, true, true},   // ...and twice
	)
	for i, step := range steps {
		for range step.admitted {
			tk, err := s.Acquire(context.Background(), "ep", tier.Critical)
			if err != nil {
				t.Fatal(err)
			}
			tk.Release()
		}
		st.rejected.Add(int64(step.refused))
		tick()
		if st.storm.Load() != step.storm || st.deepStorm.Load() != step.deep {
			t.Errorf("step %d (%d refused, %d admitted): storm %v deep %v, want %v %v",
				i, step.refused, step.admitted, st.storm.Load(), st.deepStorm.Load(), step.storm, step.deep)
		}
	}
}
