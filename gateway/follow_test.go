package gateway

import (
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/shed"
	"github.com/veerhq/veer/store"
)

const followYAML = "shed: {enabled: true, max_queue: 100}\n" +
	"limits: {keys: ['header:X-T'], dimensions: [{name: t, default: {rate: 1000, burst: 1000}}]}\n" +
	"routes: [{name: r, clusters: [{name: a}]}]\nclusters: [{name: a, backends: [{address: A}]}]\n"

func snap(docs ...store.Doc) *store.Snapshot {
	s := &store.Snapshot{Docs: map[string]store.Doc{}}
	for _, d := range docs {
		s.Docs[d.Key] = d
		s.Revision = max(s.Revision, d.Revision)
	}
	return s
}

func limitsDoc(rev int64, v string) store.Doc {
	return store.Doc{Key: store.KeyGatewayLimits, Value: []byte(v), Version: rev, Revision: rev}
}

func critDoc(rev int64, v string) store.Doc {
	return store.Doc{Key: store.KeyGatewayCriticality, Value: []byte(v), Version: rev, Revision: rev}
}

func (g *Gateway) storeCount(key, res string) int {
	return int(testutil.ToFloat64(g.m.storeDocs.WithLabelValues(key, res)))
}

// Each snapshot step leaves a config in force: the store's documents over
// the file while present and valid, the last good one otherwise, the file's
// once deleted.
func TestFollowStoreSteps(t *testing.T) {
	g, _ := startGateway(t, fill(followYAML, "A", upstream(t, func(http.ResponseWriter, *http.Request) {})))
	const L, C = store.KeyGatewayLimits, store.KeyGatewayCriticality
	for i, st := range []struct {
		name      string
		sn        *store.Snapshot
		rate      float64
		queue     int
		lim, crit [3]int // applied, removed, invalid
	}{
		{"no documents: the file's", snap(), 1000, 100, [3]int{}, [3]int{}},
		{"limits document replaces the file's", snap(limitsDoc(5, "dimensions: [{name: t, default: {rate: 1}}]")), 1, 100, [3]int{1, 0, 0}, [3]int{}},
		{"same revision again: nothing to do", snap(limitsDoc(5, "dimensions: [{name: t, default: {rate: 1}}]")), 1, 100, [3]int{1, 0, 0}, [3]int{}},
		{"malformed YAML keeps the last good", snap(limitsDoc(6, "dimensions: [")), 1, 100, [3]int{1, 0, 1}, [3]int{}},
		{"two dimensions for the file's one key", snap(limitsDoc(7, "dimensions: [{name: t}, {name: u}]")), 1, 100, [3]int{1, 0, 2}, [3]int{}},
		{"criticality document, limits unchanged", snap(limitsDoc(7, "x"), critDoc(8, "max_queue: 9")), 1, 9, [3]int{1, 0, 2}, [3]int{1, 0, 0}},
		{"limits turned off needs a restart", snap(limitsDoc(9, "dimensions: []"), critDoc(8, "")), 1, 9, [3]int{1, 0, 3}, [3]int{1, 0, 0}},
		{"unknown field in the criticality document", snap(limitsDoc(9, ""), critDoc(10, "max_queue: 3\nbogus: 1")), 1, 9, [3]int{1, 0, 3}, [3]int{1, 0, 1}},
		{"a bad one does not hold back a good one", snap(limitsDoc(11, "dimensions: [{name: t, default: {rate: 2}}]"), critDoc(12, "max_queue: -1")), 2, 9, [3]int{2, 0, 3}, [3]int{1, 0, 2}},
		{"both deleted: the file's again", snap(), 1000, 100, [3]int{2, 1, 3}, [3]int{1, 1, 2}},
	} {
		g.applyStore(st.sn)
		c := g.Config()
		if r := c.Limits.Dimensions[0].Default.Rate; r != st.rate {
			t.Errorf("step %d (%s): rate %v, want %v", i, st.name, r, st.rate)
		}
		if q := c.Shed.MaxQueue; q != st.queue {
			t.Errorf("step %d (%s): max_queue %d, want %d", i, st.name, q, st.queue)
		}
		for j, res := range []string{"applied", "removed", "invalid"} {
			if n := g.storeCount(L, res); n != st.lim[j] {
				t.Errorf("step %d (%s): %s %s = %d, want %d", i, st.name, L, res, n, st.lim[j])
			}
			if n := g.storeCount(C, res); n != st.crit[j] {
				t.Errorf("step %d (%s): %s %s = %d, want %d", i, st.name, C, res, n, st.crit[j])
			}
		}
	}
}

// A file reload while a store document is in force keeps the document's
// section and takes the rest of the file; deleting the document then
// returns to the reloaded file's section.
func TestFileReloadUnderStoreDocument(t *testing.T) {
	a := upstream(t, func(http.ResponseWriter, *http.Request) {})
	g, _ := startGateway(t, fill(followYAML, "A", a))
	g.applyStore(snap(limitsDoc(3, "dimensions: [{name: t, default: {rate: 1}}]")))
	var cfg Config
	y := strings.Replace(fill(followYAML, "A", a), "rate: 1000", "rate: 500", 1) + "trusted_networks: [10.0.0.0/8]\n"
	if err := config.Parse([]byte(y), "f.yaml", &cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Listen = g.Config().Listen
	if err := g.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	c := g.Config()
	if r := c.Limits.Dimensions[0].Default.Rate; r != 1 || len(c.TrustedNetworks) != 1 {
		t.Fatalf("after the file reload: rate %v (want the document's 1), trusted %v (want the file's)", r, c.TrustedNetworks)
	}
	g.applyStore(snap())
	if r := g.Config().Limits.Dimensions[0].Default.Rate; r != 500 {
		t.Fatalf("document deleted: rate %v, want the reloaded file's 500", r)
	}
}

// Shedding off in the file: a criticality document cannot turn it on; it
// is rejected naming shed.enabled.
func TestCriticalityDocumentNeedsShedEnabled(t *testing.T) {
	y := strings.Replace(followYAML, "enabled: true", "enabled: false", 1)
	g, _ := startGateway(t, fill(y, "A", upstream(t, func(http.ResponseWriter, *http.Request) {})))
	g.applyStore(snap(critDoc(2, "max_queue: 5")))
	if n := g.storeCount(store.KeyGatewayCriticality, "invalid"); n != 1 {
		t.Fatalf("invalid count %d, want 1", n)
	}
	if g.Config().Shed.MaxQueue == 5 {
		t.Fatal("the rejected document's max_queue is in force")
	}
	if _, err := (overlay{shed: &shed.Config{MaxQueue: 5}}).over(g.file); !strings.Contains(err.Error(), "shed.enabled") {
		t.Fatalf("error %v, want one naming shed.enabled", err)
	}
}

func TestControlStoreValidation(t *testing.T) {
	base := "clusters: [{name: c, backends: [{address: 'a:1'}]}]\nroutes: [{name: r, clusters: [{name: c}]}]\n"
	for _, tc := range []struct{ yaml, want string }{
		{"control_store: {endpoints: ['127.0.0.1:2379']}\n", "t.yaml:3: control_store.endpoints[0]"},
		{"control_store: {prefix: /x/}\n", "control_store.endpoints: required"},
		{"control_store: {endpoints: ['http://127.0.0.1:2379'], dial_timeout: -1s}\n", "control_store.dial_timeout"},
		{"control_store: {endpoints: ['http://127.0.0.1:2379'], bogus: 1}\n", "bogus"},
		{"control_store: {endpoints: ['http://127.0.0.1:2379', 'https://e:2379'], request_timeout: 3s}\n", ""},
	} {
		var c Config
		err := config.Parse([]byte(base+tc.yaml), "t.yaml", &c)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%q: %v", tc.yaml, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one containing %q", tc.yaml, err, tc.want)
		}
	}
}

// Any document bytes: applyStore never panics, and the config in force
// always validates (a document is applied whole or not at all).
func FuzzStoreDocument(f *testing.F) {
	f.Add([]byte("dimensions: [{name: t, default: {rate: 1}}]"), []byte("max_queue: 9"))
	f.Add([]byte("dimensions: ["), []byte("bogus: 1"))
	f.Add([]byte(`{"dimensions": [{"name": "t", "overrides": {"a": {"rate": 2}}}]}`), []byte(`{"limit": {"static": 3}}`))
	g, err := New(mustParse(f, fill(followYAML, "A", "127.0.0.1:9")), Options{Logger: obs.Discard, Registerer: prometheus.NewRegistry()})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = g.Close() })
	var rev int64
	f.Fuzz(func(t *testing.T, lim, crit []byte) {
		rev += 2
		g.applyStore(snap(limitsDoc(rev, string(lim)), critDoc(rev+1, string(crit))))
		c := g.Config()
		if err := c.Validate(); err != nil {
			t.Fatalf("config in force does not validate: %v", err)
		}
		if len(c.Limits.Dimensions) != 1 {
			t.Fatalf("%d dimensions in force for the file's one key", len(c.Limits.Dimensions))
		}
	})
}

func mustParse(tb testing.TB, y string) Config {
	tb.Helper()
	var c Config
	if err := config.Parse([]byte(y), "t.yaml", &c); err != nil {
		tb.Fatal(err)
	}
	return c
}

// The criticality document changes shedding at the request level: under
// the file's limit three concurrent requests reach the backend; under the
// document's (static limit 1, queue 1) the second waits and the third is
// refused with 503.
func TestCriticalityDocumentShedsRequests(t *testing.T) {
	arrived := make(chan struct{}, 8)
	release := make(chan struct{})
	be := upstream(t, func(http.ResponseWriter, *http.Request) {
		arrived <- struct{}{}
		<-release
	})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free) // runs before the upstream's Close, which waits for its handlers
	y := strings.Replace(followYAML, "max_queue: 100", "max_queue: 100, limit: {static: 100}", 1)
	g, base := startGateway(t, fill(y, "A", be))
	cl := &http.Client{Timeout: 10 * time.Second}
	codes := make(chan int, 8)
	send := func() {
		resp, err := cl.Get(base + "/")
		if err != nil {
			codes <- 0
			return
		}
		_ = resp.Body.Close()
		codes <- resp.StatusCode
	}
	waitArrivals := func(n int) {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for range n {
			select {
			case <-arrived:
			case <-timeout:
				t.Fatalf("fewer than %d requests reached the backend", n)
			}
		}
	}
	// the file's limit: three at once reach the backend
	for range 3 {
		go send()
	}
	waitArrivals(3)
	release <- struct{}{}
	release <- struct{}{}
	release <- struct{}{}
	for range 3 {
		if c := <-codes; c != 200 {
			t.Fatalf("file's shed config: status %d", c)
		}
	}

	// The client has its answers before the gateway's handlers return and
	// release their slots: wait until none is in flight, so that the
	// document's limit starts from an empty stage.
	deadline := time.Now().Add(10 * time.Second)
	for inflight(g) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first phase's requests never left the stage")
		}
		runtime.Gosched()
	}
	g.applyStore(snap(critDoc(2, "limit: {static: 1}\nmax_queue: 1\n")))
	go send()
	waitArrivals(1)
	go send() // waits in the queue
	deadline = time.Now().Add(10 * time.Second)
	for queued(g) != 1 {
		if time.Now().After(deadline) {
			var got []int
			for len(codes) > 0 {
				got = append(got, <-codes)
			}
			t.Fatalf("the second request never queued (answers so far %v, stats %+v)", got, g.shedder.Stats())
		}
		runtime.Gosched()
	}
	send()
	if c := <-codes; c != http.StatusServiceUnavailable {
		t.Fatalf("third request under the document's limit: status %d, want 503", c)
	}
	free()
	for range 2 {
		if c := <-codes; c != 200 {
			t.Fatalf("admitted request: status %d", c)
		}
	}
}

func inflight(g *Gateway) int {
	n := 0
	for _, s := range g.shedder.Stats() {
		n += s.Inflight
	}
	return n
}

func queued(g *Gateway) int {
	n := 0
	for _, s := range g.shedder.Stats() {
		n += s.Queued
	}
	return n
}
