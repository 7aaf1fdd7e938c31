package shed

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/tier"
)

// TestPreAdmissionQueue is the root cause of the real-server bench's "no
// shedding under CPU overload": on a CPU-bound server with one processor,
// Go runs handlers one after the other and the waiting requests sit in the
// scheduler's run queue before the middleware runs. The stage then sees
// requests arrive one at a time, each finding a free slot: nothing ever
// queues in it and its CoDel detectors see only zero waits.
//
// The step table replays that arrival process on a manual clock (one
// request per 5 ms of handler time, never two in flight) while the queue in
// front of the stage (the pre-admission wait the runtime probe reports)
// goes from none to a standing 250 ms and back. Without the pre-admission
// signal (the code before the fix, preWait nil) nothing is ever shed; with
// it, the sheddable tiers are shed lowest first, critical never, and
// everything is admitted again once the queue is gone.
func TestPreAdmissionQueue(t *testing.T) {
	const ms = time.Millisecond
	type phase struct {
		dur time.Duration
		pre time.Duration // wait in front of the stage
		// outcomes wanted over the phase's last 300 ms
		wantShed map[tier.Tier]string // "none" or "all"
	}
	calm := map[tier.Tier]string{tier.Sheddable: "none", tier.SheddablePlus: "none", tier.Critical: "none"}
	phases := []phase{
		{500 * ms, 0, calm},
		{time.Second, 250 * ms, map[tier.Tier]string{tier.Sheddable: "all", tier.SheddablePlus: "all", tier.Critical: "none"}},
		{3 * time.Second, 0, calm},
	}
	for _, withSignal := range []bool{false, true} {
		name := "stage alone (before the fix)"
		if withSignal {
			name = "with the pre-admission wait"
		}
		t.Run(name, func(t *testing.T) {
			clk := clock.NewManual(time.Unix(1000, 0))
			s, err := New(Config{Clock: clk, Registerer: prometheus.NewRegistry(), Logger: obs.Discard})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var pre time.Duration
			s.probe = nil
			s.preWait = nil
			if withSignal {
				s.preWait = func(time.Time, time.Duration, time.Duration) time.Duration { return pre }
			}
			tiers := []tier.Tier{tier.Sheddable, tier.SheddablePlus, tier.Critical}
			totalShed := 0
			for pi, ph := range phases {
				pre = ph.pre
				end := clk.Now().Add(ph.dur)
				shed := map[tier.Tier]int{}
				seen := map[tier.Tier]int{}
				for i := 0; clk.Now().Before(end); i++ {
					tr := tiers[i%len(tiers)]
					tk, err := s.Acquire(context.Background(), "ep", tr)
					late := end.Sub(clk.Now()) <= 300*ms
					if err != nil {
						if !errors.Is(err, ErrShed) {
							t.Fatalf("phase %d: %v", pi, err)
						}
						totalShed++
						if late {
							shed[tr]++
						}
						clk.Advance(50 * time.Microsecond) // a rejection is cheap
						continue
					}
					if late {
						seen[tr]++
					}
					if st := s.lookup("ep"); st.inflight.Load() != 1 {
						t.Fatalf("phase %d: %d in flight, want 1 (serial arrivals)", pi, st.inflight.Load())
					}
					clk.Advance(5 * ms) // the handler's CPU time
					tk.Release()
				}
				if !withSignal {
					continue
				}
				for tr, want := range ph.wantShed {
					switch want {
					case "none":
						if shed[tr] > 0 {
							t.Errorf("phase %d (pre-wait %v): %d %v requests shed, want none", pi, ph.pre, shed[tr], tr)
						}
					case "all":
						if seen[tr] > 0 || shed[tr] == 0 {
							t.Errorf("phase %d (pre-wait %v): %v admitted %d, shed %d; want all shed", pi, ph.pre, tr, seen[tr], shed[tr])
						}
					}
				}
			}
			if !withSignal && totalShed != 0 {
				t.Errorf("stage alone shed %d requests; the root cause no longer holds", totalShed)
			}
			if withSignal && totalShed == 0 {
				t.Error("nothing shed under a 250 ms pre-admission queue")
			}
		})
	}
}
