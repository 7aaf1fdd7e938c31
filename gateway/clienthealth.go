package gateway

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/veerhq/veer/breaker"
	"github.com/veerhq/veer/outcome"
)

// Clients' health path (outcome.HealthPath). A client's failover canary
// asks the domain whether it can serve; relayed to the backends, the answer
// would depend on whether they happen to serve the path (a 404 there made
// every canary fail and silently disabled failover, issue 27). The gateway
// knows the answer itself: it has a healthy upstream for the host, or not.

// serveClientHealth answers outcome.HealthPath for the request's Host: 200
// when a route of the host has a cluster that is not drained, not behind an
// open breaker, and has usable backends at or above its min_healthy_share;
// a 503 UpstreamUnavailable rejection when none; 404 when no route serves
// the host. It runs before every guard: a shedding gateway is still a
// gateway that can serve, and its canary must say so.
func (g *Gateway) serveClientHealth(w http.ResponseWriter, r *http.Request, t *table, st *reqState) {
	rt := t.match(r.Host, r.URL.Path)
	if rt == nil {
		rt = t.hostRoute(r.Host)
	}
	if rt == nil {
		http.Error(w, "no route for this host", http.StatusNotFound)
		return
	}
	st.route = rt
	healthy := rt.healthyClusters(time.Now().UnixNano())
	if healthy == 0 {
		outcome.WriteHTTP(w, outcome.Of(outcome.UpstreamUnavailable), "no healthy upstream for this host")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write([]byte(`{"status":"ok","route":` + strconv.Quote(rt.cfg.Name) + `,"healthy_clusters":` + strconv.Itoa(healthy) + "}\n"))
	}
}

// hostRoute returns the first route that serves host, whatever its path
// prefix: a host whose routes are all under /api still has a health answer.
func (t *table) hostRoute(host string) *route {
	host = normalizeHost(host)
	if rs := t.exact[host]; len(rs) > 0 {
		return rs[0]
	}
	for _, w := range t.wildcard {
		if len(host) > len(w.suffix) && len(w.routes) > 0 && strings.HasSuffix(host, w.suffix) {
			return w.routes[0]
		}
	}
	if len(t.any) > 0 {
		return t.any[0]
	}
	return nil
}

// healthyClusters counts the route's clusters that can take traffic now.
func (r *route) healthyClusters(now int64) int {
	n := 0
	for _, c := range r.clusters {
		if c.state.drained.Load() {
			continue
		}
		if c.breaker != nil && c.breaker.Status().State == breaker.Open {
			continue
		}
		if s := c.usableShare(now); s > 0 && s >= c.cfg.MinHealthyShare {
			n++
		}
	}
	return n
}

// wireOutcome is the outcome a failed dispatch is answered with: when
// nothing behind the gateway could take the request (every cluster drained,
// every breaker open), the gateway says so with UpstreamUnavailable rather
// than the Overloaded the dispatcher uses internally (which makes a retry on
// another cluster safe for any method); a client must not read it as "I shed
// you". Network kinds are written as they are: on a 5xx, Classify reads them
// back as UpstreamUnavailable too.
func wireOutcome(o outcome.Outcome) outcome.Outcome {
	if o.Kind == outcome.Overloaded && (errors.Is(o.Err, errNoBackend) || errors.Is(o.Err, breaker.ErrOpen) || errors.Is(o.Err, breaker.ErrDegraded)) {
		o.Kind = outcome.UpstreamUnavailable
	}
	return o
}
