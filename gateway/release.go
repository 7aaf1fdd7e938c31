package gateway

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"reflect"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/outcome"
	"github.com/veerhq/veer/release"
	"github.com/veerhq/veer/store"
)

// DefaultTenantHeader names the request header that carries the tenant a
// rollout assigns to a version (Route.TenantHeader).
const DefaultTenantHeader = "Veer-Tenant"

// DefaultCountsInterval is how often a gateway publishes its rollout
// counts to the store (release.CountsKey).
const DefaultCountsInterval = time.Second

// releases is the rollouts the gateway applies, by route: a copy-on-write
// map read by the request path without locks.
type releases struct {
	mu  sync.Mutex // serialises writers
	cur atomic.Pointer[map[string]*liveRollout]
	// drains: the cluster each route's rollout drained (its Plan.To
	// while the rollout drains), so that only a drain the rollout made is
	// undone; guarded by mu.
	drains map[string]string
	m      *metrics // the gateway's, set by New
}

// liveRollout is a release document in force on a route, with the counters
// of its current ID and step.
type liveRollout struct {
	r      release.Rollout
	counts *stepCounters
}

// stepCounters count one step of one rollout, per version. A request
// counts in the step it started in, even when it ends after the step moved.
type stepCounters struct {
	route, id string
	step      int
	slow      time.Duration
	v         [2]versionCounters
	prom      [2]promCounters // the route's metrics, across steps
}

// promCounters are one version's veer_gateway_release_* series of a route.
type promCounters struct{ requests, errors, slow prometheus.Counter }

type versionCounters struct {
	requests, errors, slow atomic.Int64
	latency                [release.LatencyBuckets]atomic.Int64 // release.Counts.Latency
}

func (s *stepCounters) snapshot() release.StepCounts {
	get := func(v *versionCounters) release.Counts {
		c := release.Counts{Requests: v.requests.Load(), Errors: v.errors.Load(), Slow: v.slow.Load()}
		if c.Requests > 0 {
			c.Latency = make([]int64, release.LatencyBuckets)
			for i := range v.latency {
				c.Latency[i] = v.latency[i].Load()
			}
		}
		return c
	}
	return release.StepCounts{Route: s.route, ID: s.id, Step: s.step, A: get(&s.v[release.A]), B: get(&s.v[release.B])}
}

// record counts one request's end: err is a failure to get any answer
// (network, timeout, no backend), else status is the answer's. A request the
// caller gave up on, and 4xx other than 429 (the caller's), are not counted.
func (s *stepCounters) record(v release.Version, status int, err error, d time.Duration) {
	if err != nil {
		var de *dispatchError
		if errors.As(err, &de) && de.o.Kind == outcome.ClientCanceled {
			return
		}
	} else if status >= 400 && status < 500 && status != http.StatusTooManyRequests {
		return
	}
	c, pc := &s.v[v], &s.prom[v]
	c.requests.Add(1)
	if pc.requests != nil {
		pc.requests.Inc()
	}
	if err != nil || status >= 500 || status == http.StatusTooManyRequests {
		c.errors.Add(1)
		if pc.errors != nil {
			pc.errors.Inc()
		}
	}
	if d > s.slow {
		c.slow.Add(1)
		if pc.slow != nil {
			pc.slow.Inc()
		}
	}
	c.latency[release.LatencyBucket(d)].Add(1)
}

func (rs *releases) get(route string) *liveRollout {
	if m := rs.cur.Load(); m != nil {
		return (*m)[route]
	}
	return nil
}

// set replaces the route's rollout (nil: none); the counters carry over
// while the ID and step are the same.
func (rs *releases) set(route string, r *release.Rollout) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	next := map[string]*liveRollout{}
	if m := rs.cur.Load(); m != nil {
		for k, v := range *m {
			next[k] = v
		}
	}
	if r == nil {
		delete(next, route)
	} else {
		step := r.Serving()
		lr := &liveRollout{r: *r}
		if old := next[route]; old != nil && old.counts.id == r.ID && old.counts.step == step {
			lr.counts = old.counts
		} else {
			p := r.Plan
			lr.counts = &stepCounters{route: route, id: r.ID, step: step, slow: cmp.Or(p.SLO.SlowThreshold, release.DefaultSlowThreshold)}
			if rs.m != nil {
				for _, v := range []release.Version{release.A, release.B} {
					lr.counts.prom[v] = promCounters{
						requests: rs.m.relRequests.WithLabelValues(route, v.String()),
						errors:   rs.m.relErrors.WithLabelValues(route, v.String()),
						slow:     rs.m.relSlow.WithLabelValues(route, v.String()),
					}
				}
			}
		}
		next[route] = lr
	}
	rs.cur.Store(&next)
	if rs.m == nil {
		return
	}
	rs.m.relStatus.DeletePartialMatch(prometheus.Labels{"route": route})
	if r == nil {
		rs.m.relStep.DeleteLabelValues(route)
		return
	}
	status := string(r.Status)
	if r.Draining && r.Active() {
		status = "draining"
	}
	rs.m.relStep.WithLabelValues(route).Set(float64(r.Serving()))
	rs.m.relStatus.WithLabelValues(route, status).Set(1)
}

// all returns the rollouts in force, by route name.
func (rs *releases) all() []*liveRollout {
	m := rs.cur.Load()
	if m == nil {
		return nil
	}
	out := make([]*liveRollout, 0, len(*m))
	for _, v := range *m {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].counts.route < out[j].counts.route })
	return out
}

// pinRelease decides, at the start of a request, which cluster of rt a
// rollout sends it to: it returns the cluster's index+1 (0: no rollout, or
// the rollout names a cluster the route does not have), the version and the
// counters of the step. While a rollout document is present (running,
// paused, done or aborted) only its two clusters serve the route.
func (g *Gateway) pinRelease(req *http.Request, rt *route) (pin int, v release.Version, sc *stepCounters) {
	lr := g.rel.get(rt.cfg.Name)
	if lr == nil {
		return 0, 0, nil
	}
	v = lr.r.Assign(req.Header.Get(cmp.Or(rt.cfg.TenantHeader, DefaultTenantHeader)))
	want := lr.r.Plan.From
	if v == release.B {
		want = lr.r.Plan.To
	}
	for i, c := range rt.clusters {
		if c.cfg.Name == want {
			return i + 1, v, lr.counts
		}
	}
	return 0, 0, nil
}

// ReleaseStatus is one route's rollout as the gateway applies it, with its
// counts of the current step (GET /admin/release).
type ReleaseStatus struct {
	Route  string         `json:"route"`
	ID     string         `json:"id"`
	Status release.Status `json:"status"`
	Step   int            `json:"step"`
	// Draining: the rollout drains B's cluster (every tenant on A);
	// InFlightB is then the requests in flight on it.
	Draining  bool           `json:"draining,omitempty"`
	InFlightB int64          `json:"in_flight_b,omitempty"`
	A         release.Counts `json:"a"`
	B         release.Counts `json:"b"`
}

// Releases returns the rollouts the gateway applies, by route name.
func (g *Gateway) Releases() []ReleaseStatus {
	var out []ReleaseStatus
	for _, lr := range g.rel.all() {
		c := lr.counts.snapshot()
		st := ReleaseStatus{Route: c.Route, ID: c.ID, Status: lr.r.Status, Step: c.Step, A: c.A, B: c.B}
		if lr.r.Draining && lr.r.Active() {
			st.Draining, st.InFlightB = true, g.clusterInFlight(lr.r.Plan.To)
		}
		out = append(out, st)
	}
	return out
}

// applyReleases applies the release documents of a snapshot (keys
// release.KeyPrefix+route). A document that does not decode or validate is
// logged with its key and the route keeps the rollout it had.
func (g *Gateway) applyReleases(sn *store.Snapshot, seen map[string]int64) {
	for key, d := range sn.Docs {
		if seen[key] == d.Revision {
			continue
		}
		seen[key] = d.Revision
		route := key[len(release.KeyPrefix):]
		r, err := release.ParseRollout(d.Value, key)
		if err == nil && r.Plan.Route != route {
			err = errors.New(key + ": plan.route: " + r.Plan.Route + ": not the document's route")
		}
		if err != nil {
			g.m.storeDocs.WithLabelValues(release.KeyPrefix, "invalid").Inc()
			g.log.Error("release document rejected; the route keeps its last rollout", "key", key, "version", d.Version, "err", err)
			continue
		}
		g.rel.set(route, &r)
		g.syncReleaseDrain(route, &r)
		g.m.storeDocs.WithLabelValues(release.KeyPrefix, "applied").Inc()
		g.log.Info("release document applied", "key", key, "id", r.ID, "status", r.Status, "step", r.Serving(), "reason", r.Reason)
	}
	for key := range seen {
		if _, ok := sn.Docs[key]; !ok {
			delete(seen, key)
			g.rel.set(key[len(release.KeyPrefix):], nil)
			g.syncReleaseDrain(key[len(release.KeyPrefix):], nil)
			g.m.storeDocs.WithLabelValues(release.KeyPrefix, "removed").Inc()
			g.log.Info("release document removed", "key", key)
		}
	}
}

// followReleases follows the release documents until ctx ends.
func (g *Gateway) followReleases(ctx context.Context, s store.Store, fo store.FollowOptions, done func(int64)) {
	seen := map[string]int64{}
	store.Follow(ctx, s, release.KeyPrefix, fo, func(sn *store.Snapshot) {
		g.applyReleases(sn, seen)
		if done != nil {
			done(sn.Revision)
		}
	})
}

// publishCounts writes the counts of every rollout that moves traffic
// (running or paused) to the store every interval until ctx ends, when they
// changed since the last write, without history (they are state, not
// configuration: the audit log shows the rollout's decisions instead). A failed write is logged and retried at the
// next tick: the counts are cumulative.
func (g *Gateway) publishCounts(ctx context.Context, s store.Store, clk clock.Clock, name string, every time.Duration) {
	t := clk.NewTicker(every)
	defer t.Stop()
	// the counts change every second while traffic flows: not in the
	// history and the audit log (store.Write.NoHistory)
	w := store.Write{Author: "gateway " + name, Reason: "rollout counts", NoHistory: true}
	last := map[string]release.StepCounts{} // what was written, by route: unchanged counts are not rewritten
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		for _, lr := range g.rel.all() {
			if !lr.r.Active() {
				continue
			}
			c := lr.counts.snapshot()
			if lr.r.Draining {
				c.Draining, c.InFlightB = true, g.clusterInFlight(lr.r.Plan.To)
			}
			if reflect.DeepEqual(last[c.Route], c) {
				continue
			}
			body, _ := json.Marshal(c)
			if _, err := s.Put(ctx, release.CountsKey(c.Route, name), body, w); err != nil {
				if ctx.Err() == nil {
					g.m.storeErrs.Inc()
					g.log.Warn("rollout counts not published; retrying", "route", c.Route, "err", err)
				}
				continue
			}
			last[c.Route] = c
		}
	}
}

// syncReleaseDrain drains the cluster of a route's rollout's new version
// while the rollout drains it (release.Rollout.Draining: no new requests
// to it on any route, those in flight finish) and undrains it when the
// drain ends, the rollout stops or its document goes. A cluster drained
// already (by an operator) is left as it is, and so is a cluster the
// gateway does not have.
func (g *Gateway) syncReleaseDrain(route string, r *release.Rollout) {
	want := ""
	if r != nil && r.Draining && r.Active() {
		want = r.Plan.To
	}
	g.rel.mu.Lock()
	defer g.rel.mu.Unlock()
	had := g.rel.drains[route]
	if had == want {
		return
	}
	if had != "" {
		delete(g.rel.drains, route)
		if err := g.Drain(had, "", false); err == nil {
			g.log.Info("release drain over: cluster takes requests again", "route", route, "cluster", had)
		}
	}
	if want == "" {
		return
	}
	c := g.snap.Load().clusters[want]
	if c == nil || c.state.drained.Load() {
		return
	}
	if g.Drain(want, "", true) == nil {
		if g.rel.drains == nil {
			g.rel.drains = map[string]string{}
		}
		g.rel.drains[route] = want
		g.log.Info("release drain: cluster takes no new requests until the control plane ends the drain", "route", route, "cluster", want, "id", r.ID)
	}
}

// clusterInFlight is the number of requests in flight on the cluster's
// backends (every route's), 0 for a cluster the gateway does not have.
func (g *Gateway) clusterInFlight(name string) int64 {
	c := g.snap.Load().clusters[name]
	if c == nil {
		return 0
	}
	var n int64
	for _, b := range c.backends {
		n += b.outstanding.Load()
	}
	return n
}

// gatewayName is the name a gateway publishes under: the option's, else
// "<host name>-<admin address>" (as Announce).
func (g *Gateway) gatewayName(name string) string {
	if name != "" {
		return name
	}
	host, _ := os.Hostname()
	return host + "-" + g.Addrs().Admin
}
