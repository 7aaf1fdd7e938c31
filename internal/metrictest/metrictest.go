// Package metrictest reads metric values out of a Prometheus registry in
// tests, so that a test asserts what a component counted rather than that it
// ran. One implementation for every package's tests.
package metrictest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Sum returns the sum of the series of the metric name in g whose labels
// include labels (nil or empty: every series). A counter, gauge or untyped
// series adds its value, a histogram or summary its sample count. No
// matching series: 0. A Gather error fails the test.
func Sum(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	v, _ := Lookup(t, g, name, labels)
	return v
}

// Lookup is Sum that also reports whether any series matched.
func Lookup(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("metrictest: gather: %v", err)
	}
	sum, found := 0.0, false
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if matches(m, labels) {
				sum += value(m)
				found = true
			}
		}
	}
	return sum, found
}

func matches(m *dto.Metric, labels map[string]string) bool {
	n := 0
	for _, lp := range m.GetLabel() {
		want, ok := labels[lp.GetName()]
		if !ok {
			continue
		}
		if want != lp.GetValue() {
			return false
		}
		n++
	}
	return n == len(labels)
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Untyped != nil:
		return m.GetUntyped().GetValue()
	case m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount())
	case m.Summary != nil:
		return float64(m.GetSummary().GetSampleCount())
	}
	return 0
}
