package shed

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// stateCollector exports the state gauges of every live stage registered
// with it (veer_shed_overloaded_state, veer_shed_concurrency_limit,
// veer_shed_requests_inflight, veer_shed_queue_entries), read when the
// registry is scraped: a gauge set by the stage's tick went stale as soon
// as the load stopped (the tick runs only while requests arrive or wait),
// and an idle server reported the last loaded values. At scrape time each
// stage first closes an interval that has ended (stage.refresh), so the
// overload state is as fresh as the admin view's.
//
// Shedders that share a registry share the collector (obs.Register); the
// stages of one endpoint in several Shedders are summed (limit, in flight,
// queued), and the endpoint is overloaded when any of them is.
type stateCollector struct {
	overloadedDesc, limitDesc, inflightDesc, queueDesc *prometheus.Desc

	mu     sync.Mutex
	stages map[string][]*stage
}

func newStateCollector() *stateCollector {
	ep := []string{"endpoint"}
	return &stateCollector{
		overloadedDesc: prometheus.NewDesc("veer_shed_overloaded_state",
			"1 while the endpoint's CoDel detector reports overload, else 0 (read at scrape time).", ep, nil),
		limitDesc: prometheus.NewDesc("veer_shed_concurrency_limit",
			"Current concurrency limit of the endpoint.", ep, nil),
		inflightDesc: prometheus.NewDesc("veer_shed_requests_inflight",
			"Requests running in the endpoint's handler (read at scrape time).", ep, nil),
		queueDesc: prometheus.NewDesc("veer_shed_queue_entries",
			"Requests waiting in the endpoint's queue (read at scrape time).", ep, nil),
		stages: map[string][]*stage{},
	}
}

func (c *stateCollector) add(st *stage) {
	c.mu.Lock()
	c.stages[st.name] = append(c.stages[st.name], st)
	c.mu.Unlock()
}

// remove forgets a closed stage.
func (c *stateCollector) remove(st *stage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.stages[st.name]
	for i, x := range l {
		if x == st {
			l = append(l[:i], l[i+1:]...)
			break
		}
	}
	if len(l) == 0 {
		delete(c.stages, st.name)
	} else {
		c.stages[st.name] = l
	}
}

// Describe implements prometheus.Collector.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.overloadedDesc
	ch <- c.limitDesc
	ch <- c.inflightDesc
	ch <- c.queueDesc
}

// Collect implements prometheus.Collector.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, sts := range c.stages {
		var over, limit, inflight, queued float64
		for _, st := range sts {
			v := st.refresh()
			if v.Overloaded {
				over = 1
			}
			limit += float64(v.Limit)
			inflight += float64(v.Inflight)
			queued += float64(v.Queued)
		}
		ch <- prometheus.MustNewConstMetric(c.overloadedDesc, prometheus.GaugeValue, over, name)
		ch <- prometheus.MustNewConstMetric(c.limitDesc, prometheus.GaugeValue, limit, name)
		ch <- prometheus.MustNewConstMetric(c.inflightDesc, prometheus.GaugeValue, inflight, name)
		ch <- prometheus.MustNewConstMetric(c.queueDesc, prometheus.GaugeValue, queued, name)
	}
}

var _ prometheus.Collector = (*stateCollector)(nil)
