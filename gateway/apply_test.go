package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/veerhq/veer/clock"
)

// TestRejectedApplyChangesNothing fails an Apply at each of its steps
// (the retrier, each cluster, each route, the limits, the shed table) with
// a config that drops a cluster, moves the route and raises the limit, and
// asserts that nothing the old config built changed: the route, the limit
// bucket, and the live state of the dropped cluster (a drained backend, a
// drained cluster, an ejection), which a later Apply of the old config
// must find again.
func TestRejectedApplyChangesNothing(t *testing.T) {
	a, _ := echoUpstream(t, "a")
	b, _ := echoUpstream(t, "b")
	c1 := upstream(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusInternalServerError) })
	c2, _ := echoUpstream(t, "c2")
	yaml := fill(`shed: {enabled: true}
limits: {keys: [route], dimensions: [{name: route, overrides: {r: {rate: 0.001, burst: 1}}}]}
breaker: {enabled: true}
routes:
  - {name: r, clusters: [{name: a}]}
  - {name: rc, host: c.test, clusters: [{name: c}]}
clusters:
  - {name: a, backends: [{address: A}]}
  - {name: b, backends: [{address: B}]}
  - {name: c, outlier: {consecutive_errors: 1}, backends: [{address: C1}, {address: C2}]}
`, "A", a, "B", b, "C1", c1, "C2", c2)
	g, base := startGateway(t, yaml)
	cl := &http.Client{}
	if resp, body := get(t, cl, base+"/"); resp.StatusCode != 200 || body != "a GET " {
		t.Fatalf("first request: %d %q", resp.StatusCode, body)
	}
	if resp, _ := get(t, cl, base+"/"); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("second request: %d, want 429 (rate 0.001, burst 1)", resp.StatusCode)
	}
	// eject c's failing backend (one 5xx ejects; the retry goes to c2)
	for i := 0; i < 20 && g.State().Clusters[2].Backends[0].EjectedUntil.IsZero(); i++ {
		get(t, cl, base+"/", "Host", "c.test")
	}
	if err := g.Drain("c", c2, true); err != nil {
		t.Fatal(err)
	}
	if err := g.Drain("c", "", true); err != nil {
		t.Fatal(err)
	}
	before := liveState(g)
	if before.Clusters[2].Backends[0].EjectedUntil.IsZero() {
		t.Fatalf("c's failing backend not ejected: %+v", before.Clusters[2])
	}
	old := g.Config()

	next := old
	next.Routes = []Route{{Name: "r", Clusters: []RouteCluster{{Name: "b"}}}, {Name: "fresh", Host: "fresh.test", Clusters: []RouteCluster{{Name: "n"}}}}
	next.Clusters = append(old.Clusters[:2:2], Cluster{Name: "n", Backends: []Backend{{Address: deadAddr(t)}}})
	next.Limits.Dimensions = append(next.Limits.Dimensions[:0:0], next.Limits.Dimensions...)
	next.Limits.Dimensions[0].Overrides = nil
	steps := []string{"retry", "cluster a", "cluster b", "cluster n", "route r", "route fresh", "shed"}
	errFault := errors.New("injected")
	for _, step := range steps {
		var hit bool
		g.fault = func(s string) error {
			if s == step {
				hit = true
				return fmt.Errorf("step %s: %w", s, errFault)
			}
			return nil
		}
		rejected := testutil.ToFloat64(g.m.reloads.WithLabelValues("invalid"))
		if err := g.Apply(next); !errors.Is(err, errFault) || !hit {
			t.Fatalf("fault at %q: Apply returned %v (step reached: %v)", step, err, hit)
		}
		if got := testutil.ToFloat64(g.m.reloads.WithLabelValues("invalid")) - rejected; got != 1 {
			t.Errorf("fault at %q: %v rejected reloads counted, want 1", step, got)
		}
		if resp, _ := get(t, cl, base+"/"); resp.StatusCode != http.StatusTooManyRequests {
			t.Errorf("fault at %q: the route's request got %d, want the old limit's 429", step, resp.StatusCode)
		}
		if got := liveState(g); !reflect.DeepEqual(got, before) {
			t.Errorf("fault at %q: state changed:\n got %+v\nwant %+v", step, got, before)
		}
		if n := seriesOf(t, g, "fresh", "n"); n != 0 {
			t.Errorf("fault at %q: %d metric series of the rejected config's route fresh and cluster n", step, n)
		}
	}
	g.fault = nil
	// the old config again: the dropped cluster's live state is found,
	// not rebuilt
	if err := g.Apply(old); err != nil {
		t.Fatal(err)
	}
	if got := liveState(g); !reflect.DeepEqual(got, before) {
		t.Errorf("after re-applying the old config:\n got %+v\nwant %+v", got, before)
	}
	if err := g.Apply(next); err != nil {
		t.Fatal(err)
	}
	if resp, body := get(t, cl, base+"/"); resp.StatusCode != 200 || !strings.HasPrefix(body, "b ") {
		t.Fatalf("after the good Apply: %d %q, want b and no limit", resp.StatusCode, body)
	}
	if seriesOf(t, g, "fresh", "n") == 0 {
		t.Error("no series of route fresh and cluster n after the good Apply: the check above sees nothing")
	}
}

// liveState is g.State() without the outstanding counts: an attempt's
// count drops when the gateway closes the upstream body, which may come
// after the client has read the whole answer.
func liveState(g *Gateway) State {
	s := g.State()
	for i := range s.Clusters {
		for j := range s.Clusters[i].Backends {
			s.Clusters[i].Backends[j].Outstanding = 0
		}
	}
	return s
}

// seriesOf counts the gateway's metric series labelled route=route or
// cluster=cluster.
func seriesOf(t *testing.T, g *Gateway, route, cluster string) int {
	t.Helper()
	mfs, err := g.reg.(prometheus.Gatherer).Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if (l.GetName() == "route" && l.GetValue() == route) || (l.GetName() == "cluster" && l.GetValue() == cluster) {
					n++
				}
			}
		}
	}
	return n
}

// TestApplyTakesTheConfigNewTook: the shed section's wiring fields (here a
// Clock) are New's; an Apply of the very config New took, a shed target
// changed, succeeds (Shedder.Apply refused the wiring fields, after the
// limits and the clusters had changed).
func TestApplyTakesTheConfigNewTook(t *testing.T) {
	a, _ := echoUpstream(t, "a")
	cfg := parseConfig(t, fill("shed: {enabled: true}\nroutes: [{name: r, clusters: [{name: a}]}]\nclusters: [{name: a, backends: [{address: A}]}]\n", "A", a))
	cfg.Shed.Clock = clock.Real
	g := startGatewayOpts(t, cfg, Options{})
	cfg = g.Config()
	if cfg.Shed.Clock == nil {
		t.Fatal("Config() lost the shed clock New took")
	}
	cfg.Shed.Target = 7 * time.Millisecond
	if err := g.Apply(cfg); err != nil {
		t.Fatalf("Apply of New's config: %v", err)
	}
	if got := g.Config().Shed.Target; got != 7*time.Millisecond {
		t.Errorf("shed target %v after Apply, want 7ms", got)
	}
}
