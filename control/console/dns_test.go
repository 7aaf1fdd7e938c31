package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/dnsserver"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/store"
)

// TestDNSHealthRead: GET /ui/dns reads every announced DNS server's access
// nodes' health (a real dnsserver probing a live and a closed port), names
// a server that does not answer, and needs a token.
func TestDNSHealthRead(t *testing.T) {
	live, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	var cfg dnsserver.Config
	yaml := fmt.Sprintf(`
listen: 127.0.0.1:0
zones:
  - origin: example.test.
    access:
      - name: api
        nodes:
          - {addr: 192.0.2.11, region: east, check: "tcp://%s"}
          - {addr: 192.0.2.12, region: east, check: "tcp://%s"}
`, live.Addr(), closedAddr)
	if err := config.Parse([]byte(yaml), "dns.yaml", &cfg); err != nil {
		t.Fatal(err)
	}
	round := make(chan struct{}, 1)
	srv, err := dnsserver.New(cfg, dnsserver.Options{Logger: obs.Discard, OnHealthRound: func(map[string]bool) {
		select {
		case round <- struct{}{}:
		default:
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	<-round // the first round of probes
	mux := http.NewServeMux()
	mux.Handle(dnsserver.NodeHealthPath, srv.HealthHandler())
	hs := httptest.NewServer(mux)
	defer hs.Close()

	c := newConsole(t, Config{}, Options{})
	base, _, svc := startControl(t, c)
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	for name, url := range map[string]string{"dns-1": hs.URL, "dns-2": dead.URL} {
		b, _ := json.Marshal(store.Announcement{Name: name, Admin: url})
		if _, err := svc.Store().Put(context.Background(), store.KeyDNSServersPrefix+name, b, store.Write{}); err != nil {
			t.Fatal(err)
		}
	}
	if resp, _ := do(t, "GET", base+"/ui/dns", "", "Authorization", "Bearer wrong"); resp.StatusCode != 401 {
		t.Fatalf("wrong token: %d, want 401", resp.StatusCode)
	}
	resp, body := do(t, "GET", base+"/ui/dns", "", "Authorization", "Bearer "+viewerToken)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Security-Policy") != CSP {
		t.Fatalf("viewer: %d %s", resp.StatusCode, body)
	}
	var got DNSHealth
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if len(got.Servers) != 2 || got.Servers[0].Name != "dns-1" || !got.Servers[0].Up || got.Servers[1].Up || !strings.Contains(got.Servers[1].Error, "not answering") {
		t.Fatalf("servers %+v, want dns-1 read and dns-2 not answering", got.Servers)
	}
	n := got.Servers[0].Nodes
	if len(n) != 2 || got.Servers[0].Interval != dnsserver.DefaultHealthInterval {
		t.Fatalf("dns-1: %+v", got.Servers[0])
	}
	if a := n[0]; a.Domain != "api.example.test" || a.Addr != "192.0.2.11" || a.Region != "east" || !a.Probed || !a.Up || a.Since.IsZero() || a.Error != "" {
		t.Errorf("live node %+v, want probed up", a)
	}
	if b := n[1]; b.Addr != "192.0.2.12" || !b.Probed || b.Up || b.Since.IsZero() || b.Error == "" {
		t.Errorf("closed node %+v, want probed down with the error", b)
	}
}

// FuzzDecodeDNSReport: any answer a DNS server might send decodes or is
// refused without a panic; a decoded one has a node list (never null in
// the page's JSON) and encodes again.
func FuzzDecodeDNSReport(f *testing.F) {
	f.Add([]byte(`{"interval_ns":5000000000,"nodes":[{"domain":"api.example.test","addr":"192.0.2.11","check":"tcp://127.0.0.1:1","probed":true,"up":false,"since":"2026-12-02T05:58:24Z","error":"refused"}]}`))
	f.Add([]byte(`{"nodes":null}`))
	f.Add([]byte(`{"interval_ns":-1,"nodes":[{}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		rep, err := decodeDNSReport(strings.NewReader(string(b)))
		if err != nil {
			return
		}
		if rep.Nodes == nil {
			t.Fatal("nil nodes")
		}
		if _, err := json.Marshal(DNSHealth{Servers: []DNSServer{{Name: "x", Up: true, Interval: rep.Interval, Nodes: rep.Nodes}}}); err != nil {
			t.Fatalf("decoded %q but cannot encode it: %v", b, err)
		}
	})
}
