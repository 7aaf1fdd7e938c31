package metrictest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestSumAndLookup(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "veer_test_events_total", Help: "h"}, []string{"kind", "result"})
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "veer_test_level", Help: "h"})
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "veer_test_wait_seconds", Help: "h"})
	reg.MustRegister(c, g, h)
	c.WithLabelValues("a", "ok").Add(2)
	c.WithLabelValues("a", "fail").Add(3)
	c.WithLabelValues("b", "ok").Add(5)
	g.Set(7)
	h.Observe(1)
	h.Observe(2)
	tests := []struct {
		name   string
		labels map[string]string
		want   float64
		found  bool
	}{
		{"veer_test_events_total", nil, 10, true},
		{"veer_test_events_total", map[string]string{"kind": "a"}, 5, true},
		{"veer_test_events_total", map[string]string{"kind": "a", "result": "ok"}, 2, true},
		{"veer_test_events_total", map[string]string{"kind": "c"}, 0, false},
		{"veer_test_events_total", map[string]string{"absent_label": "x"}, 0, false},
		{"veer_test_level", nil, 7, true},
		{"veer_test_wait_seconds", nil, 2, true},
		{"veer_test_missing_total", nil, 0, false},
	}
	for _, tt := range tests {
		got, found := Lookup(t, reg, tt.name, tt.labels)
		if got != tt.want || found != tt.found {
			t.Errorf("Lookup(%s, %v) = %v, %v; want %v, %v", tt.name, tt.labels, got, found, tt.want, tt.found)
		}
		if s := Sum(t, reg, tt.name, tt.labels); s != tt.want {
			t.Errorf("Sum(%s, %v) = %v, want %v", tt.name, tt.labels, s, tt.want)
		}
	}
}
