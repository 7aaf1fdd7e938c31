package shed

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/tier"
)

func TestWaitCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := obs.Register(reg, newWaitCollector())
	b := obs.Register(reg, newWaitCollector()) // a second Shedder on the same registry
	if a != b {
		t.Fatal("second registration did not share the collector")
	}
	h1, h2 := a.hist("GET /x", tier.Critical), b.hist("GET /x", tier.Critical)
	h1.observeZero()
	h1.observe(3 * time.Millisecond)
	h2.observe(2 * time.Second) // beyond the last bucket
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var admitted float64
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetName() {
			case "veer_shed_admitted_total":
				admitted = m.GetCounter().GetValue()
			case "veer_shed_queue_wait_seconds":
				h := m.GetHistogram()
				if h.GetSampleCount() != 3 || h.GetSampleSum() < 2.003 || h.GetSampleSum() > 2.0031 {
					t.Errorf("histogram count %d sum %v, want 3 and 2.003", h.GetSampleCount(), h.GetSampleSum())
				}
				want := map[float64]uint64{0.0005: 1, 0.0025: 1, 0.005: 2, 1: 2}
				for _, bk := range h.GetBucket() {
					if w, ok := want[bk.GetUpperBound()]; ok && bk.GetCumulativeCount() != w {
						t.Errorf("bucket le=%v: %d, want %d", bk.GetUpperBound(), bk.GetCumulativeCount(), w)
					}
				}
			}
		}
	}
	if admitted != 3 {
		t.Errorf("admitted %v, want 3", admitted)
	}
	for _, err := range obs.Lint(reg) {
		t.Error(err)
	}
}
