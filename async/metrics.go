package async

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/obs"
)

type metrics struct {
	submits        *prometheus.CounterVec
	submitLatency  prometheus.Histogram
	attempts       *prometheus.CounterVec
	retries        *prometheus.CounterVec
	done           *prometheus.CounterVec
	queueDelay     *prometheus.HistogramVec
	e2e            *prometheus.HistogramVec
	callbackFailed prometheus.Counter
	// by tenant: the top Config.MetricTenants tenants by submissions, the
	// rest as "other"
	tenantSubmits *prometheus.CounterVec
	tenantE2E     *prometheus.HistogramVec
	top           *topTenants
}

func newMetrics(reg prometheus.Registerer, topN int) *metrics {
	lat := []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .25, 1, 5}
	long := prometheus.ExponentialBuckets(0.001, 4, 12)
	m := &metrics{
		submits: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "veer_async_submissions_total",
			Help: "Submissions by result: accepted, duplicate (same idempotency key), unavailable."}, []string{"result"}),
		submitLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "veer_async_submit_duration_seconds",
			Help: "Time until the store acknowledged a submission.", Buckets: lat}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "veer_async_attempts_total",
			Help: "Upstream attempts by group and outcome."}, []string{"group", "outcome"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "veer_async_retries_total",
			Help: "Attempts followed by a scheduled retry, by group."}, []string{"group"}),
		done: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "veer_async_finished_total",
			Help: "Invocations finished, by group and state (succeeded; failed: dead-lettered)."}, []string{"group", "state"}),
		queueDelay: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "veer_async_queue_delay_seconds",
			Help: "From submission to the first attempt, by group.", Buckets: long}, []string{"group"}),
		e2e: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "veer_async_end_to_end_seconds",
			Help: "From submission to success, by group.", Buckets: long}, []string{"group"}),
		callbackFailed: prometheus.NewCounter(prometheus.CounterOpts{Name: "veer_async_callback_failures_total",
			Help: "Callbacks given up after their bounded retries."}),
	}
	m.tenantSubmits = obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "veer_async_tenant_submissions_total",
		Help: "Accepted submissions of the busiest tenants (top N by recent submissions; the rest as tenant=\"other\")."}, []string{"tenant"}))
	m.tenantE2E = obs.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "veer_async_tenant_end_to_end_seconds",
		Help: "From submission to success, for the busiest tenants (top N; the rest as tenant=\"other\").", Buckets: long}, []string{"tenant"}))
	m.top = newTopTenants(topN, m.tenantSubmits, m.tenantE2E)
	m.submits = obs.Register(reg, m.submits)
	m.submitLatency = obs.Register(reg, m.submitLatency)
	m.attempts = obs.Register(reg, m.attempts)
	m.retries = obs.Register(reg, m.retries)
	m.done = obs.Register(reg, m.done)
	m.queueDelay = obs.Register(reg, m.queueDelay)
	m.e2e = obs.Register(reg, m.e2e)
	m.callbackFailed = obs.Register(reg, m.callbackFailed)
	return m
}

func (m *metrics) submitted(tenant string, err error, existing bool, d time.Duration) {
	switch {
	case err != nil && errors.Is(err, ErrUnavailable):
		m.submits.WithLabelValues("unavailable").Inc()
	case err != nil:
		m.submits.WithLabelValues("error").Inc()
	case existing:
		m.submits.WithLabelValues("duplicate").Inc()
	default:
		m.submits.WithLabelValues("accepted").Inc()
		m.submitLatency.Observe(d.Seconds())
		m.top.observe(tenant, func(l string) { m.tenantSubmits.WithLabelValues(l).Inc() })
	}
}
