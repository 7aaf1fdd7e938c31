package gateway

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/store"
	"github.com/veerhq/veer/store/storebolt"
)

// TestAnnounceWritesHeartbeatsAndDeletes: the announcement names the admin
// listener; a heartbeat re-writes it after someone deleted it and writes
// nothing while it is in place; a clean stop deletes it.
func TestAnnounceWritesHeartbeatsAndDeletes(t *testing.T) {
	cfg := parseConfig(t, "admin: {addr: 127.0.0.1:0}\nroutes: [{name: r, clusters: [{name: c}]}]\nclusters: [{name: c, backends: [{address: 127.0.0.1:1}]}]\n")
	g := startGatewayOpts(t, cfg, Options{})
	st, err := storebolt.Open(filepath.Join(t.TempDir(), "store.db"), storebolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	clk := clock.NewManual(time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := st.Watch(ctx, store.KeyGatewaysPrefix, 1)
	next := func(want store.EventType) store.Doc {
		t.Helper()
		select {
		case ev := <-events:
			if ev.Type != want {
				t.Fatalf("event %v %s, want %v", ev.Type, ev.Doc.Key, want)
			}
			return ev.Doc
		case <-time.After(10 * time.Second):
			t.Fatalf("no %v event within 10s", want)
		}
		return store.Doc{}
	}
	done := make(chan error, 1)
	actx, stop := context.WithCancel(ctx)
	go func() { done <- g.Announce(actx, st, AnnounceOptions{Name: "gw-1", Clock: clk, Every: time.Second}) }()

	d := next(store.Put)
	a, err := store.ParseAnnouncement(d.Value)
	if err != nil {
		t.Fatal(err)
	}
	if d.Key != "gateways/gw-1" || a.Admin != "http://"+g.Addrs().Admin || !a.Started.Equal(clk.Now()) {
		t.Fatalf("announcement %s = %+v, want gateways/gw-1 naming http://%s", d.Key, a, g.Addrs().Admin)
	}
	if want := []store.AnnouncedRoute{{Name: "r", Clusters: []string{"c"}}}; !reflect.DeepEqual(a.Routes, want) || a.Truncated {
		t.Fatalf("announced routes %+v (truncated %v), want %+v", a.Routes, a.Truncated, want)
	}
	if err := st.Delete(ctx, d.Key, store.Write{Author: "test"}); err != nil {
		t.Fatal(err)
	}
	next(store.Delete)
	clk.Advance(time.Second)                    // the heartbeat finds it missing
	if d2 := next(store.Put); d2.Version != 3 { // versions count deletes too
		t.Fatalf("re-announced version %d, want 3", d2.Version)
	}
	clk.Advance(time.Second) // in place: no write
	// a reload's routes show at the next heartbeat
	nc := g.Config()
	nc.Clusters = append(nc.Clusters, Cluster{Name: "d", Backends: []Backend{{Address: "127.0.0.1:2"}}})
	nc.Routes = []Route{{Name: "r", Clusters: []RouteCluster{{Name: "c"}, {Name: "d"}}}, {Name: "s", PathPrefix: "/s", Clusters: []RouteCluster{{Name: "d"}}}}
	if err := g.Apply(nc); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	a, err = store.ParseAnnouncement(next(store.Put).Value)
	if err != nil {
		t.Fatal(err)
	}
	if want := []store.AnnouncedRoute{{Name: "r", Clusters: []string{"c", "d"}}, {Name: "s", Clusters: []string{"d"}}}; !reflect.DeepEqual(a.Routes, want) {
		t.Fatalf("announced routes after the reload %+v, want %+v", a.Routes, want)
	}
	stop()
	next(store.Delete) // the next event is the stop's delete, not a heartbeat write
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	h, err := st.History(ctx, store.KeyGatewaysPrefix, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 5 { // put, test's delete, re-put, the reload's put, stop's delete
		t.Fatalf("%d history entries, want 4: %+v", len(h), h)
	}
}

func TestAnnounceNeedsAdminListener(t *testing.T) {
	cfg := parseConfig(t, "routes: [{name: r, clusters: [{name: c}]}]\nclusters: [{name: c, backends: [{address: 127.0.0.1:1}]}]\n")
	g := startGatewayOpts(t, cfg, Options{})
	if err := g.Announce(context.Background(), nil, AnnounceOptions{}); err != ErrNoAdmin {
		t.Fatalf("Announce without admin listener: %v, want ErrNoAdmin", err)
	}
}

// TestAnnouncedRoutesBounded: a config with more routes or clusters than an
// announcement holds announces the first ones, truncated.
func TestAnnouncedRoutesBounded(t *testing.T) {
	var cfg Config
	for i := range store.MaxAnnouncedRoutes + 1 {
		r := Route{Name: fmt.Sprint("r", i)}
		if i == 0 {
			for j := range store.MaxAnnouncedClusters + 1 {
				r.Clusters = append(r.Clusters, RouteCluster{Name: fmt.Sprint("c", j)})
			}
		}
		cfg.Routes = append(cfg.Routes, r)
	}
	routes, truncated := announcedRoutes(cfg)
	if !truncated || len(routes) != store.MaxAnnouncedRoutes || len(routes[0].Clusters) != store.MaxAnnouncedClusters {
		t.Fatalf("truncated %v, %d routes, %d clusters of the first", truncated, len(routes), len(routes[0].Clusters))
	}
	if routes, truncated := announcedRoutes(Config{}); routes == nil || len(routes) != 0 || truncated {
		t.Fatalf("no routes announced as %#v, truncated %v: want an empty list", routes, truncated)
	}
}
