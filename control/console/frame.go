package console

import (
	"io"
	"math"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Frame is one second of the live view, as streamed to the browser.
type Frame struct {
	Time     time.Time `json:"time"`
	Error    string    `json:"error,omitempty"`
	Gateways []Gateway `json:"gateways"`
	// Totals over the gateways that answered.
	RPS      float64            `json:"rps"`
	Errors   map[string]float64 `json:"errors"`
	Admitted map[string]float64 `json:"admitted_by_tier"`
	Shed     map[string]float64 `json:"shed_by_tier"`
	Limited  map[string]float64 `json:"limited_by_dimension"`
	// LimitedTier: limited requests by the tier shedding would give them.
	LimitedTier map[string]float64 `json:"limited_by_tier"`
}

// Gateway is one announced gateway in a Frame; rates are per second since
// the previous frame.
type Gateway struct {
	Name    string    `json:"name"`
	Admin   string    `json:"admin"`
	Started time.Time `json:"started"`
	// Up: its /metrics answered in time; else Error says why.
	Up    bool    `json:"up"`
	Error string  `json:"error,omitempty"`
	RPS   float64 `json:"rps"`
	// Errors are answered requests by outcome kind, success excluded.
	Errors   map[string]float64 `json:"errors"`
	Routes   []Route            `json:"routes"`
	Clusters []Cluster          `json:"clusters"`
	// Admitted and Shed are by tier (shedding on); Limited by the limit
	// dimension that refused, and LimitedTier by the request's tier
	// (veer_limit_rejected_total{tier}; "unset" when the request stated
	// none and shedding is off).
	Admitted    map[string]float64 `json:"admitted_by_tier"`
	Shed        map[string]float64 `json:"shed_by_tier"`
	Limited     map[string]float64 `json:"limited_by_dimension"`
	LimitedTier map[string]float64 `json:"limited_by_tier"`
}

// Route is one route's traffic.
type Route struct {
	Name   string             `json:"name"`
	RPS    float64            `json:"rps"`
	Errors map[string]float64 `json:"errors"`
}

// Cluster is one cluster's upstream attempts and state.
type Cluster struct {
	Name   string             `json:"name"`
	RPS    float64            `json:"rps"`
	Errors map[string]float64 `json:"errors"`
	// Breaker is closed, open or half-open ("" without a breaker).
	Breaker string `json:"breaker,omitempty"`
	// Out lists backends not taking new requests (unhealthy, ejected or
	// drained); Backends counts them all.
	Out      []string `json:"out"`
	Backends int      `json:"backends"`
	// Ejections per second by outlier detection.
	Ejections float64 `json:"ejections"`
}

// Metric families the live view reads.
const (
	mRequests  = "veer_gateway_requests_total"
	mAttempts  = "veer_gateway_upstream_attempts_total"
	mBreaker   = "veer_gateway_breaker_state"
	mUsable    = "veer_gateway_backend_usable_state"
	mEjections = "veer_gateway_ejections_total"
	mAdmitted  = "veer_shed_admitted_total"
	mShed      = "veer_shed_shed_total"
	mLimited   = "veer_limit_rejected_total"
)

// maxRate bounds a rate (per second) taken from a gateway's counters, so
// that sums stay finite whatever a /metrics answer says.
const maxRate = 1e15

var wanted = []string{mRequests, mAttempts, mBreaker, mUsable, mEjections, mAdmitted, mShed, mLimited}

// sample is one series' value.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// samples are the wanted series of one scrape, by a canonical series key.
type samples map[string]sample

func seriesKey(name string, labels map[string]string) string {
	var b strings.Builder
	b.WriteString(name)
	for _, k := range sortedKeys(labels) {
		b.WriteString("\x00" + k + "=" + labels[k])
	}
	return b.String()
}

// parseSamples reads the Prometheus text format and keeps the wanted
// families' counters and gauges.
func parseSamples(r io.Reader) (samples, error) {
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	out := samples{}
	for _, name := range wanted {
		mf := fams[name]
		if mf == nil {
			continue
		}
		for _, m := range mf.GetMetric() {
			var v float64
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				v = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				v = m.GetGauge().GetValue()
			case dto.MetricType_UNTYPED:
				v = m.GetUntyped().GetValue()
			default:
				continue
			}
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			out[seriesKey(name, labels)] = sample{name, labels, v}
		}
	}
	return out, nil
}

// fill computes g's rates from two scrapes dt seconds apart (dt 0: the
// first scrape, rates 0) and its states from the newer one. A counter
// that went down (the gateway restarted) counts from 0.
func (g *Gateway) fill(prev, cur samples, dt float64) {
	rate := func(k string, s sample) float64 {
		if dt <= 0 || math.IsNaN(s.value) || math.IsInf(s.value, 0) { // the first scrape, or no number
			return 0
		}
		p := prev[k] // a series new since the last scrape started at 0
		r := (s.value - p.value) / dt
		if s.value < p.value { // the gateway restarted between scrapes
			r = s.value / dt
		}
		if !(r >= 0 && r < maxRate) { // a negative or absurd counter
			return 0
		}
		return r
	}
	g.Errors, g.Admitted, g.Shed, g.Limited, g.LimitedTier = map[string]float64{}, map[string]float64{}, map[string]float64{}, map[string]float64{}, map[string]float64{}
	routes, clusters := map[string]*Route{}, map[string]*Cluster{}
	cl := func(name string) *Cluster {
		if clusters[name] == nil {
			clusters[name] = &Cluster{Name: name, Errors: map[string]float64{}, Out: []string{}}
		}
		return clusters[name]
	}
	for _, k := range sortedKeys(cur) {
		s := cur[k]
		l := s.labels
		switch s.name {
		case mRequests:
			rt := routes[l["route"]]
			if rt == nil {
				rt = &Route{Name: l["route"], Errors: map[string]float64{}}
				routes[l["route"]] = rt
			}
			r := rate(k, s)
			rt.RPS += r
			g.RPS += r
			if l["kind"] != "success" && r > 0 {
				rt.Errors[l["kind"]] += r
				g.Errors[l["kind"]] += r
			}
		case mAttempts:
			c, r := cl(l["cluster"]), rate(k, s)
			c.RPS += r
			if l["kind"] != "success" && r > 0 {
				c.Errors[l["kind"]] += r
			}
		case mBreaker:
			if math.IsNaN(s.value) {
				continue
			}
			cl(l["cluster"]).Breaker = [...]string{"closed", "open", "half-open"}[min(max(int(s.value), 0), 2)]
		case mUsable:
			c := cl(l["cluster"])
			c.Backends++
			if s.value == 0 {
				c.Out = append(c.Out, l["backend"])
			}
		case mEjections:
			cl(l["cluster"]).Ejections += rate(k, s)
		case mAdmitted:
			g.Admitted[l["tier"]] += rate(k, s)
		case mShed:
			g.Shed[l["tier"]] += rate(k, s)
		case mLimited:
			r := rate(k, s)
			g.Limited[l["dimension"]] += r
			if tn := l["tier"]; tn != "" { // a gateway from before the tier label counts in no tier
				g.LimitedTier[tn] += r
			}
		}
	}
	for _, n := range sortedKeys(routes) {
		g.Routes = append(g.Routes, *routes[n])
	}
	for _, n := range sortedKeys(clusters) {
		g.Clusters = append(g.Clusters, *clusters[n])
	}
}

// total sums the gateways that answered.
func (f *Frame) total() {
	f.Errors, f.Admitted, f.Shed, f.Limited, f.LimitedTier = map[string]float64{}, map[string]float64{}, map[string]float64{}, map[string]float64{}, map[string]float64{}
	add := func(dst, src map[string]float64) {
		for k, v := range src {
			dst[k] += v
		}
	}
	for i := range f.Gateways {
		g := &f.Gateways[i]
		if g.Errors == nil {
			g.Errors, g.Admitted, g.Shed, g.Limited, g.LimitedTier = map[string]float64{}, map[string]float64{}, map[string]float64{}, map[string]float64{}, map[string]float64{}
		}
		g.Routes, g.Clusters = orEmpty(g.Routes), orEmpty(g.Clusters)
		f.RPS += g.RPS
		add(f.Errors, g.Errors)
		add(f.Admitted, g.Admitted)
		add(f.Shed, g.Shed)
		add(f.Limited, g.Limited)
		add(f.LimitedTier, g.LimitedTier)
	}
	slices.SortFunc(f.Gateways, func(a, b Gateway) int { return strings.Compare(a.Name, b.Name) })
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
