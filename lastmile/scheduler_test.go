package lastmile

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/veerhq/veer/lastmile/lmtest"
)

func TestParseScheduleResponse(t *testing.T) {
	cases := []struct {
		body string
		ok   bool
	}{
		{`{"version":1,"ttl_seconds":300,"nodes":[{"addr":"192.0.2.1:443","protocols":["h3","h2"]},{"addr":"[2001:db8::1]:8443","server_name":"edge.example"}]}`, true},
		{`{"version":1,"ttl_seconds":0,"nodes":[{"addr":"192.0.2.1:443"}],"extra":"ignored"}`, true},
		{`{"version":2,"ttl_seconds":300,"nodes":[{"addr":"192.0.2.1:443"}]}`, false},
		{`{"version":1,"ttl_seconds":-1,"nodes":[{"addr":"192.0.2.1:443"}]}`, false},
		{`{"version":1,"ttl_seconds":300,"nodes":[]}`, false},
		{`{"version":1,"ttl_seconds":300,"nodes":[{"addr":"edge.example:443"}]}`, false},
		{`{"version":1,"ttl_seconds":300,"nodes":[{"addr":"192.0.2.1:0"}]}`, false},
		{`{"version":1,"ttl_seconds":300,"nodes":[{"addr":"192.0.2.1:443","protocols":["spdy"]}]}`, false},
		{`[`, false},
	}
	for _, c := range cases {
		r, err := ParseScheduleResponse([]byte(c.body))
		if (err == nil) != c.ok {
			t.Errorf("%s: err = %v, want ok %v", c.body, err, c.ok)
		}
		if err != nil && !errors.Is(err, ErrSchedule) {
			t.Errorf("%s: err %v does not wrap ErrSchedule", c.body, err)
		}
		if err == nil && len(r.Nodes) == 0 {
			t.Errorf("%s: no nodes", c.body)
		}
	}
}

// The wire schema written independently in lmtest (as the control plane
// will) parses here.
func TestScheduleSchemaAgreesWithServerSide(t *testing.T) {
	b, err := json.Marshal(lmtest.ScheduleResponse{Version: lmtest.ScheduleVersion, TTLSeconds: 60,
		Nodes: []lmtest.AccessNode{{Addr: "192.0.2.1:443", ServerName: "a.example", Protocols: []string{"h2"}}}})
	must(t, err)
	r, err := ParseScheduleResponse(b)
	must(t, err)
	if r.TTLSeconds != 60 || r.Nodes[0].ServerName != "a.example" || r.Nodes[0].offers("h3") || !r.Nodes[0].offers("h2") {
		t.Fatalf("%+v", r)
	}
	var req lmtest.ScheduleRequest
	b, err = json.Marshal(ScheduleRequest{Version: ScheduleVersion, Domain: "api.example", Client: "veer", Protocols: []string{"h3"}})
	must(t, err)
	must(t, json.Unmarshal(b, &req))
	if req.Domain != "api.example" || req.Version != 1 || req.Client != "veer" {
		t.Fatalf("%+v", req)
	}
}

// FuzzParseScheduleResponse: the parser never panics, and whatever it
// accepts is usable: 1..32 nodes with ip:port addresses and a bounded TTL.
func FuzzParseScheduleResponse(f *testing.F) {
	f.Add([]byte(`{"version":1,"ttl_seconds":300,"nodes":[{"addr":"192.0.2.1:443","protocols":["h3","h2"]}]}`))
	f.Add([]byte(`{"version":1,"ttl_seconds":86400,"nodes":[{"addr":"[::ffff:1.2.3.4]:1"}]}`))
	f.Add([]byte(`{"version":1,"nodes":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseScheduleResponse(data)
		if err != nil {
			if !errors.Is(err, ErrSchedule) {
				t.Fatalf("error %v does not wrap ErrSchedule", err)
			}
			return
		}
		if len(r.Nodes) == 0 || len(r.Nodes) > maxScheduleNodes || r.TTLSeconds < 0 || r.TTLSeconds > maxScheduleTTL {
			t.Fatalf("accepted %+v", r)
		}
		for _, n := range r.Nodes {
			if _, err := parseAddrPort(n.Addr, 0); err != nil {
				t.Fatalf("accepted node %q: %v", n.Addr, err)
			}
		}
	})
}
