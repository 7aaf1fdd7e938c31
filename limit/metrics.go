package limit

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/obs"
)

type metrics struct {
	keys     *prometheus.GaugeVec
	overflow *prometheus.CounterVec
	evicted  *prometheus.CounterVec
	rejected *prometheus.CounterVec
	body     *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	return &metrics{
		keys: obs.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "veer_limit_keys",
			Help: "Keys kept per dimension.",
		}, []string{"dimension"})),
		overflow: obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "veer_limit_key_overflow_total",
			Help: "Requests whose key did not fit under max_keys and shared the dimension's overflow entry.",
		}, []string{"dimension"})),
		evicted: obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "veer_limit_evicted_keys_total",
			Help: "Idle keys evicted.",
		}, []string{"dimension"})),
		rejected: obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "veer_limit_rejected_total",
			Help: "Requests rejected by dimension and reason (rate, concurrency).",
		}, []string{"dimension", "reason"})),
		body: obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "veer_limit_body_rejected_total",
			Help: "Requests (413) and responses rejected for their body size, by direction.",
		}, []string{"direction"})),
	}
}

func (m *metrics) newTable(name string) *table {
	return &table{
		name:    name,
		keys:    m.keys.WithLabelValues(name),
		over:    m.overflow.WithLabelValues(name),
		evicted: m.evicted.WithLabelValues(name),
		rejRate: m.rejected.WithLabelValues(name, "rate"),
		rejConc: m.rejected.WithLabelValues(name, "concurrency"),
	}
}
