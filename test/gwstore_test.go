package test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/control"
	"github.com/veerhq/veer/gateway"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/store"
	"github.com/veerhq/veer/store/storeetcd"
	"github.com/veerhq/veer/store/storeetcd/etcdtest"
)

// followingGateway is a gateway following the control store, with what a
// test waits on: the revision of the last snapshot it handled.
type followingGateway struct {
	g    *gateway.Gateway
	reg  *prometheus.Registry
	base string
	rev  atomic.Int64
	tick chan struct{}
}

// waitUntil blocks until cond holds, re-checking after each snapshot the
// gateway handles; it fails after a bound (no fixed sleeps).
func (f *followingGateway) waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(15 * time.Second)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-f.tick:
		case <-deadline.C:
			t.Fatalf("%s: not reached within 15s (last revision handled %d)", what, f.rev.Load())
		}
	}
}

func (f *followingGateway) counter(name string, labels map[string]string) float64 {
	mfs, _ := f.reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue next
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

const gwStoreYAML = `
listen: {addr: 'off', plain: '127.0.0.1:0'}
routes: [{name: r, clusters: [{name: c}]}]
clusters: [{name: c, backends: [{address: '%BACKEND%'}]}]
limits:
  keys: ["header:X-Tenant"]
  dimensions: [{name: tenant, default: {rate: 1000, burst: 1000}}]
shed: {enabled: true, max_queue: 100}
`

// Two gateways follow one real etcd: the limits and criticality documents
// written to the store change both gateways' guards at run time; an invalid
// document keeps the last good config (counted); with etcd killed the
// gateways keep serving with the last config, and once it is back they
// follow again (deleting the document returns them to their file's limits).
func TestGatewaysFollowControlStore(t *testing.T) {
	etcd := etcdtest.New(t)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer be.Close()
	writer, err := storeetcd.New(storeetcd.Config{Endpoints: []string{etcd.URL}, RequestTimeout: 10 * time.Second}, storeetcd.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var gws []*followingGateway
	done := make(chan struct{})
	followers := 0
	defer func() {
		cancel()
		for range followers {
			<-done
		}
	}()
	for i := range 2 {
		var cfg gateway.Config
		y := []byte(strings.ReplaceAll(gwStoreYAML, "%BACKEND%", be.Listener.Addr().String()))
		if err := config.Parse(y, "gw.yaml", &cfg); err != nil {
			t.Fatal(err)
		}
		f := &followingGateway{reg: prometheus.NewRegistry(), tick: make(chan struct{}, 1)}
		if f.g, err = gateway.New(cfg, gateway.Options{Logger: obs.Discard, Registerer: f.reg}); err != nil {
			t.Fatalf("gateway %d: %v", i, err)
		}
		if err := f.g.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer scancel()
			_ = f.g.Shutdown(sctx)
		}()
		f.base = "http://" + f.g.Addrs().Plain
		st, err := storeetcd.New(storeetcd.Config{Endpoints: []string{etcd.URL}}, storeetcd.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		followers++
		go func() {
			defer func() { done <- struct{}{} }()
			f.g.FollowStore(ctx, st, gateway.StoreOptions{Backoff: 50 * time.Millisecond, OnSnapshot: func(rev int64) {
				f.rev.Store(rev)
				select {
				case f.tick <- struct{}{}:
				default:
				}
			}})
		}()
		gws = append(gws, f)
	}
	cl := &http.Client{Timeout: 5 * time.Second}
	// statuses sends n requests for tenant and returns their status codes.
	statuses := func(f *followingGateway, tenant string, n int) (ok, limited int) {
		t.Helper()
		for range n {
			req, _ := http.NewRequest(http.MethodGet, f.base+"/", nil)
			req.Header.Set("X-Tenant", tenant)
			resp, err := cl.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusOK:
				ok++
			case http.StatusTooManyRequests:
				limited++
			default:
				t.Fatalf("status %d", resp.StatusCode)
			}
		}
		return ok, limited
	}
	put := func(key, doc string) store.Doc {
		t.Helper()
		d, err := writer.Put(context.Background(), key, []byte(doc), store.Write{Author: "test"})
		if err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
		return d
	}
	handled := func(d store.Doc) {
		t.Helper()
		for _, f := range gws {
			f.waitUntil(t, "revision "+strconv.FormatInt(d.Revision, 10), func() bool { return f.rev.Load() >= d.Revision })
		}
	}

	// the file's limits: 1000/s with a burst of 1000
	for i, f := range gws {
		f.waitUntil(t, "first snapshot", func() bool { return f.rev.Load() > 0 })
		if ok, _ := statuses(f, "before", 5); ok != 5 {
			t.Fatalf("gateway %d with the file's limits admitted %d of 5", i, ok)
		}
	}

	// the limits document, written through the control plane's admin API,
	// replaces them on both gateways
	handled(adminPut(t, etcd.URL, store.KeyGatewayLimits, "dimensions: [{name: tenant, default: {rate: 0.001, burst: 2}}]\n"))
	for i, f := range gws {
		if ok, limited := statuses(f, "after", 5); ok != 2 || limited != 3 {
			t.Fatalf("gateway %d with the store's limits: %d admitted, %d limited of 5, want 2 and 3", i, ok, limited)
		}
	}

	// the criticality document replaces the file's shed table
	handled(put(store.KeyGatewayCriticality, "max_queue: 7\n"))
	for i, f := range gws {
		if q := f.g.Config().Shed.MaxQueue; q != 7 {
			t.Fatalf("gateway %d: shed max_queue %d after the store's criticality document, want 7", i, q)
		}
	}

	// invalid documents are rejected and counted; the last good config stays
	handled(put(store.KeyGatewayLimits, "dimensions: [{name: tenant, default: {rate: -1}}]\n"))
	handled(put(store.KeyGatewayCriticality, "max_queue: 7\nno_such_field: 1\n"))
	for i, f := range gws {
		if n := f.counter("veer_gateway_store_documents_total", map[string]string{"document": store.KeyGatewayLimits, "result": "invalid"}); n != 1 {
			t.Errorf("gateway %d: %v invalid limits documents counted, want 1", i, n)
		}
		if n := f.counter("veer_gateway_store_documents_total", map[string]string{"document": store.KeyGatewayCriticality, "result": "invalid"}); n != 1 {
			t.Errorf("gateway %d: %v invalid criticality documents counted, want 1", i, n)
		}
		if q := f.g.Config().Shed.MaxQueue; q != 7 {
			t.Errorf("gateway %d: shed max_queue %d after an invalid document, want the last good 7", i, q)
		}
		if ok, limited := statuses(f, "invalid", 4); ok != 2 || limited != 2 {
			t.Fatalf("gateway %d after an invalid limits document: %d admitted, %d limited of 4, want the last good limits (2 and 2)", i, ok, limited)
		}
	}

	// etcd killed: the gateways keep serving with the last config
	etcd.Kill()
	for i, f := range gws {
		if ok, limited := statuses(f, "down", 4); ok != 2 || limited != 2 {
			t.Fatalf("gateway %d with etcd down: %d admitted, %d limited of 4, want the last good limits (2 and 2)", i, ok, limited)
		}
	}
	// etcd back: deleting the limits document returns both to the file's
	if err := etcd.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := writer.Delete(context.Background(), store.KeyGatewayLimits, store.Write{Author: "test"}); err != nil {
		t.Fatalf("delete after restart: %v", err)
	}
	for i, f := range gws {
		f.waitUntil(t, "limits document removed", func() bool {
			return f.counter("veer_gateway_store_documents_total", map[string]string{"document": store.KeyGatewayLimits, "result": "removed"}) == 1
		})
		if ok, _ := statuses(f, "back", 5); ok != 5 {
			t.Fatalf("gateway %d back on the file's limits admitted %d of 5", i, ok)
		}
		if q := f.g.Config().Shed.MaxQueue; q != 7 {
			t.Errorf("gateway %d: shed max_queue %d, want the store's 7 (its document is still there)", i, q)
		}
	}
}

// adminPut writes a document through a control-plane instance on etcdURL
// (its admin API over real HTTP, as an operator would) and returns the
// written document's revision.
func adminPut(t *testing.T, etcdURL, key, doc string) store.Doc {
	t.Helper()
	dir := t.TempDir()
	svc, err := control.New(control.Config{DataDir: dir, Etcd: storeetcd.Config{Endpoints: []string{etcdURL}}}, control.Options{Logger: obs.Discard})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	path, _ := svc.AdminTokenFile()
	tok, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(svc.AdminHandler())
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPut, srv.URL+"/v1/admin/docs/"+key, strings.NewReader(doc))
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	req.Header.Set("X-Veer-Reason", "gateway store test")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("admin PUT %s: %d %s", key, resp.StatusCode, body)
	}
	var d store.Doc
	if err := json.Unmarshal(body, &d); err != nil || d.Revision == 0 {
		t.Fatalf("admin PUT %s: answer %s: %v", key, body, err)
	}
	return d
}
