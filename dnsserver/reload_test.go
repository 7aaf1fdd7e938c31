package dnsserver

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestReloadKeepsAnswering applies two versions of the data over and over
// while clients query: every query gets a whole answer of one version.
func TestReloadKeepsAnswering(t *testing.T) {
	v1 := parseConfig(t, testZone)
	v2 := parseConfig(t, strings.Replace(testZone, `"www 60 A 192.0.2.11"`, `"www 60 A 192.0.2.99"`, 1))
	s := startServer(t, v1, Options{})
	var stop atomic.Bool
	var wg sync.WaitGroup
	var asked, bad atomic.Int64
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &dns.Client{Net: "udp"}
			for !stop.Load() {
				q := new(dns.Msg)
				q.SetQuestion("www.example.test.", dns.TypeA)
				r, _, err := c.Exchange(q, s.Addr().String())
				asked.Add(1)
				if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 2 {
					bad.Add(1)
				}
			}
		}()
	}
	for i := range 300 {
		cfg := v1
		if i%2 == 1 {
			cfg = v2
		}
		if err := s.Apply(cfg); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	if bad.Load() != 0 || asked.Load() == 0 {
		t.Errorf("%d of %d queries failed during reloads", bad.Load(), asked.Load())
	}
	if got := testutil.ToFloat64(s.m.reloads.WithLabelValues("ok")); got != 300 {
		t.Errorf("reloads{ok} = %v, want 300", got)
	}
}

// TestReloadInvalidKeepsOld: an invalid reload is rejected, named, counted,
// and the old data keeps serving.
func TestReloadInvalidKeepsOld(t *testing.T) {
	s := startServer(t, parseConfig(t, testZone), Options{})
	bad := parseConfig(t, testZone)
	bad.Zones[0].Records = append(bad.Zones[0].Records, "www CNAME elsewhere")
	err := s.Apply(bad)
	if err == nil || !strings.Contains(err.Error(), "zones[0].records[12]: conflicting record") || !errors.Is(err, ErrConflict) {
		t.Fatalf("Apply = %v", err)
	}
	err = s.SetData(Data{Regions: []Region{{CIDR: "x", Region: "a"}}})
	if err == nil || !strings.Contains(err.Error(), "regions[0].cidr") {
		t.Fatalf("SetData = %v", err)
	}
	if r := ask(t, "udp", s.Addr(), "www.example.test.", dns.TypeA, 0); len(r.Answer) != 2 {
		t.Errorf("after rejected reloads: %d answers, want the old 2", len(r.Answer))
	}
	if got := testutil.ToFloat64(s.m.reloads.WithLabelValues("invalid")); got != 2 {
		t.Errorf("reloads{invalid} = %v, want 2", got)
	}
	// A valid SetData replaces the data and keeps the rest.
	if err := s.SetData(Data{Zones: []Zone{{Origin: "other.test.", Records: []string{"www A 192.0.2.77"}}}}); err != nil {
		t.Fatal(err)
	}
	if r := ask(t, "udp", s.Addr(), "www.example.test.", dns.TypeA, 0); r.Rcode != dns.RcodeRefused {
		t.Errorf("old zone after SetData: %s, want REFUSED", dns.RcodeToString[r.Rcode])
	}
	if r := ask(t, "udp", s.Addr(), "www.other.test.", dns.TypeA, 0); len(r.Answer) != 1 {
		t.Errorf("new zone: %v", r.Answer)
	}
}
