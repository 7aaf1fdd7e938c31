package gateway

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/outcome"
)

// metrics of a Gateway. Labels are config names (route, cluster, backend
// address from the config file), never per-request values.
type metrics struct {
	requests    *prometheus.CounterVec   // route, kind
	duration    *prometheus.HistogramVec // route
	attempts    *prometheus.CounterVec   // cluster, backend, kind
	retries     *prometheus.CounterVec   // route
	ejections   *prometheus.CounterVec   // cluster, backend
	panics      *prometheus.CounterVec   // cluster
	stalled     *prometheus.CounterVec   // cluster
	outstanding *prometheus.GaugeVec     // cluster, backend
	backendUp   *prometheus.GaugeVec     // cluster, backend
	breakerSt   *prometheus.GaugeVec     // cluster
	reloads     *prometheus.CounterVec   // result
	logDropped  prometheus.Counter
	staleServed *prometheus.CounterVec // route
	rejected    *prometheus.CounterVec // guard
	storeDocs   *prometheus.CounterVec // document, result
	storeErrs   prometheus.Counter
	// rollouts (release documents), by route and version (a, b)
	relRequests *prometheus.CounterVec
	relErrors   *prometheus.CounterVec
	relSlow     *prometheus.CounterVec
	relStep     *prometheus.GaugeVec // route
	relStatus   *prometheus.GaugeVec // route, status
}

// routeMetrics are a route's pre-resolved series, so that the request path
// does no label lookups.
type routeMetrics struct {
	requests []prometheus.Counter // by outcome.Kind
	duration prometheus.Observer
	retries  prometheus.Counter
}

func (m *metrics) forRoute(name string) *routeMetrics {
	rm := &routeMetrics{duration: m.duration.WithLabelValues(name), retries: m.retries.WithLabelValues(name)}
	for _, k := range outcome.Kinds() {
		rm.requests = append(rm.requests, m.requests.WithLabelValues(name, k.String()))
	}
	return rm
}

// attemptCounters returns a backend's attempt counters by outcome.Kind.
func (m *metrics) attemptCounters(cluster, addr string) []prometheus.Counter {
	var cs []prometheus.Counter
	for _, k := range outcome.Kinds() {
		cs = append(cs, m.attempts.WithLabelValues(cluster, addr, k.String()))
	}
	return cs
}

// clusterMetrics are a cluster's pre-resolved series.
type clusterMetrics struct {
	panics  prometheus.Counter
	stalled prometheus.Counter
	breaker prometheus.Gauge
}

// DurationBuckets are the boundaries, in seconds, of
// veer_gateway_request_duration_seconds; a route's slo.latency must be one.
var DurationBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

func newMetrics(reg prometheus.Registerer) *metrics {
	return &metrics{
		requests: obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "veer_gateway_requests_total", Help: "Requests answered, by route and outcome kind.",
		}, []string{"route", "kind"})),
		duration: obs.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "veer_gateway_request_duration_seconds", Help: "Time from request to response headers, by route.",
			Buckets: DurationBuckets,
		}, []string{"route"})),
		attempts: obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "veer_gateway_upstream_attempts_total", Help: "Attempts sent upstream, by cluster, backend and outcome kind.",
		}, []string{"cluster", "backend", "kind"})),
		retries: obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "veer_gateway_retries_total", Help: "Attempts after the first, by route.",
		}, []string{"route"})),
		ejections: obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "veer_gateway_ejections_total", Help: "Backends ejected by outlier detection.",
		}, []string{"cluster", "backend"})),
		panics: obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "veer_gateway_panic_picks_total", Help: "Backend picks made in panic mode (no usable backend, spread over all).",
		}, []string{"cluster"})),
		stalled: obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "veer_gateway_stalled_skips_total", Help: "Cluster picks skipped because every usable backend of the cluster had requests outstanding and had answered none for the stall threshold.",
		}, []string{"cluster"})),
		outstanding: obs.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "veer_gateway_backend_inflight", Help: "Requests outstanding per backend.",
		}, []string{"cluster", "backend"})),
		backendUp: obs.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "veer_gateway_backend_usable_state", Help: "1 when the backend takes new requests (healthy, not ejected, not drained).",
		}, []string{"cluster", "backend"})),
		breakerSt: obs.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "veer_gateway_breaker_state", Help: "Cluster breaker state: 0 closed, 1 open, 2 half-open.",
		}, []string{"cluster"})),
		reloads: obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "veer_gateway_reloads_total", Help: "Config applications, by result (ok, invalid).",
		}, []string{"result"})),
		logDropped: obs.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "veer_gateway_access_log_dropped_total", Help: "Access log entries dropped because the log queue was full.",
		})),
		staleServed: obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "veer_gateway_stale_served_total", Help: "Answers served stale from the cache after every attempt failed.",
		}, []string{"route"})),
		rejected: obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "veer_gateway_guard_rejected_total", Help: "Requests rejected by a guard (body, limit, shed, breaker, smuggling).",
		}, []string{"guard"})),
		storeDocs: obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "veer_gateway_store_documents_total", Help: "Control-store documents handled (gateway/criticality, gateway/limits), by result (applied, removed, invalid).",
		}, []string{"document", "result"})),
		relRequests: obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "veer_gateway_release_requests_total", Help: "Requests of a route under a rollout, by version (a: plan.from, b: plan.to); 4xx other than 429 and callers that gave up are not counted.",
		}, []string{"route", "version"})),
		relErrors: obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "veer_gateway_release_errors_total", Help: "Of veer_gateway_release_requests_total, the failed ones (5xx, 429, network), by version.",
		}, []string{"route", "version"})),
		relSlow: obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "veer_gateway_release_slow_total", Help: "Of veer_gateway_release_requests_total, those over the plan's slo.slow_threshold, by version.",
		}, []string{"route", "version"})),
		relStep: obs.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "veer_gateway_release_step_state", Help: "The rollout step the gateway applies to the route (-1: every tenant on A: draining B or aborted).",
		}, []string{"route"})),
		relStatus: obs.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "veer_gateway_release_status_state", Help: "1 for the status of the route's rollout (draining, running, paused, aborted, done).",
		}, []string{"route", "status"})),
		storeErrs: obs.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "veer_gateway_store_follow_errors_total", Help: "Times the control-store watch ended or a list failed (the last config stays; the gateway re-lists).",
		})),
	}
}
