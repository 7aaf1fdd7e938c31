package control_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/veerhq/veer/control"
	"github.com/veerhq/veer/lastmile"
	"github.com/veerhq/veer/lastmile/lmtest"
	"github.com/veerhq/veer/routing/schedule"
)

// TestScheduleWithLastmileClient: lastmile's real client, with only the
// scheduler step, reaches an access node through this server's answer.
func TestScheduleWithLastmileClient(t *testing.T) {
	e := start(t, control.Config{}, control.Options{})
	ca, err := lmtest.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	node, err := lmtest.NewNode("edge", ca, lmtest.NodeOptions{Names: []string{"api.test"}})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	down, err := lmtest.NewNode("down", ca, lmtest.NodeOptions{Names: []string{"api.test"}})
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	e.put(control.KeyTable, table())
	e.waitVersion(e.put(control.KeyAccess, control.Access{TTLSeconds: 120, Regions: map[string][]control.Node{
		"local": {
			{Node: schedule.Node{Addr: down.Addr()}, Down: true, Weight: 9},
			{Node: schedule.Node{Addr: node.Addr(), ServerName: "api.test", Protocols: []string{"h3", "h2"}}, Weight: 5},
			{Node: schedule.Node{Addr: "127.0.0.1:1"}, Domains: []string{"other.test"}},
		},
	}}))
	pool := ca.Pool()
	pem, err := os.ReadFile(filepath.Join(e.dir, "tls.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool.AppendCertsFromPEM(pem)
	port := e.addrs.Public[strings.LastIndex(e.addrs.Public, ":")+1:]
	lm, err := lastmile.New(lastmile.Config{
		Steps:     []lastmile.RouteStep{lastmile.StepScheduler},
		DNS:       lastmile.DNSConfig{Order: []lastmile.ResolverStep{lastmile.StepBootstrap}, Bootstrap: map[string][]string{"localhost": {"127.0.0.1"}}},
		Scheduler: lastmile.SchedulerConfig{URL: "https://localhost:" + port + "/v1/schedule"},
	}, lastmile.Options{RootCAs: pool})
	if err != nil {
		t.Fatal(err)
	}
	defer lm.Close()
	tr := &lastmile.Trace{}
	req, _ := http.NewRequestWithContext(lastmile.WithTrace(t.Context(), tr), "GET", "https://api.test/", nil)
	r, err := lm.RoundTrip(req)
	if err != nil {
		t.Fatalf("through the scheduler: %v (trace %s)", err, tr)
	}
	io.Copy(io.Discard, r.Body)
	r.Body.Close()
	if node.Hits() != 1 || down.Hits() != 0 || tr.Served != lastmile.StepScheduler {
		t.Fatalf("hits edge %d down %d, step %s", node.Hits(), down.Hits(), tr.Served)
	}
}

func TestScheduleRequestErrors(t *testing.T) {
	e := start(t, control.Config{}, control.Options{})
	url := "http://" + e.addrs.Plain + "/v1/schedule"
	post := func(body string) (int, string) {
		r, err := http.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		return r.StatusCode, readAll(r)
	}
	if code, _ := post(`{"version":1,"domain":"api.test"}`); code != 503 {
		t.Fatalf("no access document: %d, want 503", code)
	}
	e.waitVersion(e.put(control.KeyAccess, control.Access{Default: []control.Node{{Node: schedule.Node{Addr: "192.0.2.1:443"}}}}))
	for body, want := range map[string]int{
		`{"version":2,"domain":"api.test"}`: 400,
		`{"version":1}`:                     400,
		`[`:                                 400,
		`{"version":1,"domain":"api.test","protocols":["h3"],"client":"veer"}`: 200,
	} {
		code, b := post(body)
		if code != want {
			t.Fatalf("%s: %d %s, want %d", body, code, b, want)
		}
		if code == 200 {
			resp, err := schedule.ParseResponse([]byte(b))
			if err != nil || resp.TTLSeconds != control.DefaultScheduleTTL || resp.Nodes[0].Addr != "192.0.2.1:443" {
				t.Fatalf("response %s: %v", b, err)
			}
		}
	}
}
