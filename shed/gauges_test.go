package shed

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/tier"
)

// gauges reads the state gauges of endpoint "ep" from reg.
func gauges(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if m.GetGauge() == nil || len(m.GetLabel()) != 1 || m.GetLabel()[0].GetValue() != "ep" {
				continue
			}
			out[mf.GetName()] = m.GetGauge().GetValue()
		}
	}
	return out
}

// TestGaugesTellTheTruthAfterLoad: the state gauges and the admin view
// follow the stage while it is loaded and reach 0 within one interval of
// the load's end, with no request arriving after it (issue 18: an idle
// server reported overloaded_state 1, queue_entries 60 and inflight 93
// until the next request, because the gauges were set only by the tick).
func TestGaugesTellTheTruthAfterLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		h := newHarness(t, Config{Limit: LimitConfig{Static: 1}, Registerer: reg})
		h.s.rq = nil
		ctx := context.Background()
		h.start(ctx, "hold", tier.Critical)
		for _, n := range []string{"c1", "c2", "c3"} {
			h.start(ctx, n, tier.Critical)
		}
		h.start(ctx, "p1", tier.SheddablePlus)
		// Mid-interval, before any tick: the gauges read the stage now.
		time.Sleep(10 * time.Millisecond)
		want := map[string]float64{
			"veer_shed_overloaded_state": 0, "veer_shed_requests_inflight": 1,
			"veer_shed_queue_entries": 4, "veer_shed_concurrency_limit": 1,
		}
		checkGauges(t, "loaded, not yet overloaded", gauges(t, reg), want)
		time.Sleep(200 * time.Millisecond) // t=210: a standing queue for two intervals
		h.wantShed("p1", ReasonOverload)
		want["veer_shed_overloaded_state"], want["veer_shed_queue_entries"] = 1, 3
		checkGauges(t, "overloaded", gauges(t, reg), want)

		// The load ends at t=210 and nothing arrives after it.
		for _, n := range []string{"hold", "c1", "c2", "c3"} {
			h.finish(n)
		}
		end := time.Now()
		want = map[string]float64{
			"veer_shed_overloaded_state": 0, "veer_shed_requests_inflight": 0,
			"veer_shed_queue_entries": 0, "veer_shed_concurrency_limit": 1,
		}
		// Within one interval, without a scrape or a request in between
		// (the admin view is read first, and no scrape has ticked).
		time.Sleep(DefaultInterval)
		synctest.Wait()
		if time.Since(end) > DefaultInterval {
			t.Fatalf("slept %v", time.Since(end))
		}
		if h.s.lookup("ep").overloaded.Load() {
			t.Error("still overloaded one interval after the load: the idle stage did not tick")
		}
		for _, e := range h.s.Stats() {
			if e.Overloaded || e.Inflight != 0 || e.Queued != 0 {
				t.Errorf("admin view %+v one interval after the load, want idle", e)
			}
		}
		checkGauges(t, "one interval after the load", gauges(t, reg), want)
	})
}

func checkGauges(t *testing.T, when string, got, want map[string]float64) {
	t.Helper()
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %s = %v, want %v", when, k, got[k], w)
		}
	}
}
