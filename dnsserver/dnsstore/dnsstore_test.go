package dnsstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/veerhq/veer/control"
	"github.com/veerhq/veer/dnsserver"
	"github.com/veerhq/veer/dnsserver/dnsstore"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/routing/schedule"
	"github.com/veerhq/veer/store"
	"github.com/veerhq/veer/store/docs"
	"github.com/veerhq/veer/store/storebolt"
	"github.com/veerhq/veer/store/storeetcd"
	"github.com/veerhq/veer/store/storeetcd/etcdtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// grpc's and etcd client's background goroutines linger briefly after Close.
		goleak.IgnoreTopFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
		goleak.IgnoreTopFunction("google.golang.org/grpc/internal/transport.(*controlBuffer).get"),
	)
}

const zonesYAML = `zones:
  - origin: example.test.
    soa: ns1.example.test. hostmaster.example.test. 1 3600 600 86400 60
    records: ["www 60 A 192.0.2.10"]
    access:
      - name: edge
        ttl: 5
`

// rig is a DNS server fed by a Source on st.
type rig struct {
	t   *testing.T
	st  store.Store
	srv *dnsserver.Server
	reg *prometheus.Registry
}

func newRig(t *testing.T, st store.Store) *rig {
	t.Helper()
	var cfg dnsserver.Config
	cfg.Listen, cfg.UDPWorkers = "127.0.0.1:0", 1
	reg := prometheus.NewRegistry()
	srv, err := dnsserver.New(cfg, dnsserver.Options{Logger: obs.Discard, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	src, err := dnsstore.New(st, dnsstore.Options{Logger: obs.Discard, Registerer: reg, Backoff: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, src) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		srv.Close()
	})
	return &rig{t: t, st: st, srv: srv, reg: reg}
}

// put writes a document, retrying while the store is unavailable.
func (r *rig) put(key string, v any) {
	r.t.Helper()
	b, ok := v.([]byte)
	if !ok {
		var err error
		if b, err = json.Marshal(v); err != nil {
			r.t.Fatal(err)
		}
	}
	r.eventually(func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := r.st.Put(ctx, key, b, store.Write{Author: "test"})
		return err == nil, fmt.Sprint("put ", key, ": ", err)
	})
}

// answers asks edge.example.test. A over UDP and returns the addresses.
func (r *rig) answers() ([]string, error) { return r.lookup("edge.example.test.") }

// lookup asks name A over UDP and returns the addresses, sorted.
func (r *rig) lookup(name string) ([]string, error) {
	q := new(dns.Msg)
	q.SetQuestion(name, dns.TypeA)
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	m, _, err := c.Exchange(q, r.srv.Addr().String())
	if err != nil {
		return nil, err
	}
	var out []string
	for _, rr := range m.Answer {
		if a, ok := rr.(*dns.A); ok {
			out = append(out, a.A.String())
		}
	}
	slices.Sort(out)
	return out, nil
}

// eventually polls cond until it holds or 10 s pass.
func (r *rig) eventually(cond func() (bool, string)) {
	r.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatal(why)
		}
		<-tick.C
	}
}

func (r *rig) wantAnswers(want ...string) {
	r.t.Helper()
	r.eventually(func() (bool, string) {
		got, err := r.answers()
		return err == nil && slices.Equal(got, want), fmt.Sprintf("answers %v (%v), want %v", got, err, want)
	})
}

func (r *rig) invalid() float64 {
	return testutil.ToFloat64(counter(r.reg, "veer_dnsstore_updates_total", "invalid"))
}

func (r *rig) wantInvalid(n float64) {
	r.t.Helper()
	r.eventually(func() (bool, string) {
		got := r.invalid()
		return got == n, fmt.Sprintf("invalid updates %v, want %v", got, n)
	})
}

func counter(g prometheus.Gatherer, name, result string) prometheus.Collector {
	return gathered{g, name, result}
}

// gathered reads one labelled counter from a registry.
type gathered struct {
	g            prometheus.Gatherer
	name, result string
}

func (c gathered) Describe(chan<- *prometheus.Desc) {}
func (c gathered) Collect(ch chan<- prometheus.Metric) {
	mfs, _ := c.g.Gather()
	for _, mf := range mfs {
		if mf.GetName() != c.name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == c.result {
				ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(c.name, "", nil, nil), prometheus.CounterValue, m.GetCounter().GetValue())
			}
		}
	}
}

func node(addr string, down bool) docs.AccessNode {
	return docs.AccessNode{Node: schedule.Node{Addr: addr}, Down: down}
}

// scenario runs the behaviour every backend must show, over real UDP.
func scenario(r *rig) {
	t := r.t
	// Nothing served before dns/zones exists.
	if got, err := r.answers(); err != nil || len(got) != 0 {
		t.Fatalf("before any document: %v %v", got, err)
	}
	// The access nodes are written with the control plane's own type.
	r.put(store.KeyAccess, docs.Access{Default: []docs.AccessNode{node("10.0.0.1:443", false), node("10.0.0.2:443", false)}})
	r.put(dnsstore.KeyZones, []byte(zonesYAML))
	r.wantAnswers("10.0.0.1", "10.0.0.2")

	// Marked down in the control plane: it leaves the answers.
	r.put(store.KeyAccess, docs.Access{Default: []docs.AccessNode{node("10.0.0.1:443", false), node("10.0.0.2:443", true)}})
	r.wantAnswers("10.0.0.1")

	// Removed, another added.
	r.put(store.KeyAccess, docs.Access{Default: []docs.AccessNode{node("10.0.0.3:443", false)}})
	r.wantAnswers("10.0.0.3")

	// A node for another domain only does not serve this one.
	r.put(store.KeyAccess, docs.Access{Default: []docs.AccessNode{node("10.0.0.3:443", false),
		{Node: schedule.Node{Addr: "10.0.0.9:443"}, Domains: []string{"other.example.test"}},
		{Node: schedule.Node{Addr: "10.0.0.8:443"}, Domains: []string{"EDGE.example.test."}}}})
	r.wantAnswers("10.0.0.3", "10.0.0.8")

	// Invalid documents: refused, counted, the old answers stay.
	base := r.invalid()
	r.put(dnsstore.KeyZones, []byte(zonesYAML+"    bogus: 1\n"))
	r.wantInvalid(base + 1)
	r.put(store.KeyAccess, []byte(`{"default": [{"addr": "nope"}]}`))
	r.wantInvalid(base + 2)
	// The last good access nodes still combine with a new zones document.
	r.put(dnsstore.KeyZones, []byte(strings.Replace(zonesYAML, `records: [`, `records: ["new 60 A 192.0.2.99", `, 1)))
	r.eventually(func() (bool, string) {
		got, err := r.lookup("new.example.test.")
		return err == nil && slices.Equal(got, []string{"192.0.2.99"}), fmt.Sprintf("new.example.test. %v %v", got, err)
	})
	r.wantAnswers("10.0.0.3", "10.0.0.8")
	// Every node removed: refused too, the old answers stay.
	r.put(store.KeyAccess, docs.Access{})
	r.wantInvalid(base + 3)
	r.wantAnswers("10.0.0.3", "10.0.0.8")

	// The routing table's regions place the client (127.0.0.1) in "eu".
	r.put(dnsstore.KeyZones, []byte(zonesYAML))
	r.put(store.KeyTable, control.Table{DefaultDomain: "wap.example.test", Regions: []control.Region{{Name: "eu", CIDRs: []string{"127.0.0.0/8"}}}})
	r.put(store.KeyAccess, docs.Access{Default: []docs.AccessNode{node("10.0.0.3:443", false)},
		Regions: map[string][]docs.AccessNode{"eu": {node("10.0.0.4:443", false)}}})
	r.wantAnswers("10.0.0.4")

	// All nodes of the region down: fail over to the default nodes; all
	// down: all answered (fail open).
	r.put(store.KeyAccess, docs.Access{Default: []docs.AccessNode{node("10.0.0.3:443", false)},
		Regions: map[string][]docs.AccessNode{"eu": {node("10.0.0.4:443", true)}}})
	r.wantAnswers("10.0.0.3")
	r.put(store.KeyAccess, docs.Access{Default: []docs.AccessNode{node("10.0.0.3:443", true)},
		Regions: map[string][]docs.AccessNode{"eu": {node("10.0.0.4:443", true)}}})
	r.wantAnswers("10.0.0.4")
}

func TestBolt(t *testing.T) {
	st, err := storebolt.Open(filepath.Join(t.TempDir(), "store.db"), storebolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, st)
	t.Cleanup(func() { st.Close() })
	scenario(r)
	if errs := obs.Lint(r.reg); len(errs) > 0 {
		t.Fatal(errs)
	}
}

func TestEtcd(t *testing.T) {
	srv := etcdtest.New(t)
	st, err := storeetcd.New(storeetcd.Config{Endpoints: []string{srv.URL}, RequestTimeout: 500 * time.Millisecond}, storeetcd.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r := newRig(t, st)
	scenario(r)

	// etcd killed: the answers continue.
	srv.Kill()
	for range 20 {
		got, err := r.answers()
		if err != nil || !slices.Equal(got, []string{"10.0.0.4"}) {
			t.Fatalf("with etcd down: %v %v", got, err)
		}
	}
	// Back: changes are followed again.
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	r.put(store.KeyAccess, docs.Access{Default: []docs.AccessNode{node("10.0.0.5:443", false)}})
	r.wantAnswers("10.0.0.5")
}
