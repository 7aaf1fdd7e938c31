package limitredis

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/obs"
)

type metrics struct {
	state      prometheus.Gauge
	fallbacks  prometheus.Counter
	recoveries prometheus.Counter
	errors     prometheus.Counter
	latency    prometheus.Observer
	rejected   *prometheus.CounterVec
	batch      prometheus.Observer
}

func newMetrics(reg prometheus.Registerer) metrics {
	return metrics{
		state: obs.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "veer_limitredis_fallback_state",
			Help: "1 while decisions are local because Redis is unreachable, else 0.",
		})),
		fallbacks: obs.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "veer_limitredis_fallbacks_total",
			Help: "Switches to local fallback limits.",
		})),
		recoveries: obs.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "veer_limitredis_recoveries_total",
			Help: "Returns from local fallback to Redis.",
		})),
		errors: obs.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "veer_limitredis_errors_total",
			Help: "Failed Redis calls (decisions, releases, renewals).",
		})),
		latency: obs.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "veer_limitredis_decision_seconds",
			Help:    "Latency of decisions made through Redis.",
			Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25},
		})),
		rejected: obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "veer_limitredis_rejected_total",
			Help: "Requests rejected through Redis by dimension and reason.",
		}, []string{"dimension", "reason"})),
		batch: obs.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "veer_limitredis_batch_requests",
			Help:    "Decisions and releases sent to Redis in one pipeline (one round trip).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
		})),
	}
}
