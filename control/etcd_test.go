package control_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/veerhq/veer/control"
	"github.com/veerhq/veer/store"
	"github.com/veerhq/veer/store/storeetcd"
	"github.com/veerhq/veer/store/storeetcd/etcdtest"
)

// TestThreeInstancesOnEtcd: an override applied through one instance
// reaches the other two; with etcd killed every instance keeps answering
// from its snapshot and writes fail with 503; when etcd is back the watches
// resume and a new override reaches everyone.
func TestThreeInstancesOnEtcd(t *testing.T) {
	srv := etcdtest.New(t)
	shared := t.TempDir()
	var es []*env
	for range 3 {
		es = append(es, start(t, control.Config{
			Etcd:           storeetcd.Config{Endpoints: []string{srv.URL}, RequestTimeout: 2 * time.Second},
			SigningKeyFile: filepath.Join(shared, "routing.key"),
			AdminTokenFile: filepath.Join(shared, "admin.token"),
		}, control.Options{}))
	}
	local := netip.MustParseAddr("127.0.0.1")
	rev := es[0].put(control.KeyTable, table())
	for _, e := range es {
		e.waitVersion(rev)
	}
	override := func(e *env, domain string) int64 {
		r := e.admin("POST", "/v1/admin/playbook", e.token, []byte(`{"action":"emergency_set","override":{"primary":"`+domain+`"}}`))
		for try := 0; r.code == 503 && try < 5; try++ { // etcd's client still reconnecting after the restart
			r = e.admin("POST", "/v1/admin/playbook", e.token, []byte(`{"action":"emergency_set","override":{"primary":"`+domain+`"}}`))
		}
		if r.code != 200 {
			t.Fatalf("override %s: %d %s", domain, r.code, r.body)
		}
		var d struct{ Revision int64 }
		json.Unmarshal([]byte(r.body), &d)
		return d.Revision
	}
	rev = override(es[1], "sorry.example.com")
	for i, e := range es {
		if a := e.waitVersion(rev).Decide(local, "d1", ""); a.Primary != "sorry.example.com" {
			t.Fatalf("instance %d: %+v", i, a)
		}
	}
	srv.Kill()
	for i, e := range es {
		r, err := http.Post("http://"+e.addrs.Plain+"/v1/route", "application/json", stringsReader(`{"device_id":"d1"}`))
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(r)
		r.Body.Close()
		if r.StatusCode != 200 || !strings.Contains(body, "sorry.example.com") {
			t.Fatalf("instance %d with etcd down: %d %s", i, r.StatusCode, body)
		}
	}
	w := es[2].admin("POST", "/v1/admin/playbook", es[2].token, []byte(`{"action":"emergency_clear"}`))
	if w.code != 503 || w.hdr.Get("Retry-After") == "" {
		t.Fatalf("write with etcd down: %d %s", w.code, w.body)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	rev = override(es[2], "back.example.com")
	for i, e := range es {
		if a := e.waitVersion(rev).Decide(local, "d1", ""); a.Primary != "back.example.com" {
			t.Fatalf("instance %d after etcd came back: %+v", i, a)
		}
	}
	// A gateway-like consumer following the store sees the same state.
	st, err := storeetcd.New(storeetcd.Config{Endpoints: []string{srv.URL}}, storeetcd.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan *store.Snapshot, 1)
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		store.Follow(ctx, st, "routing/", store.FollowOptions{}, func(sn *store.Snapshot) {
			select {
			case got <- sn:
			default:
			}
		})
	}()
	sn := <-got
	cancel()
	<-followed
	if !strings.Contains(string(sn.Docs[control.KeyEmergency].Value), "back.example.com") {
		t.Fatalf("follower: %s", sn.Docs[control.KeyEmergency].Value)
	}
}
