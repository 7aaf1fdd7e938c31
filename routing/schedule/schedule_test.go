package schedule

import (
	"errors"
	"net/netip"
	"testing"
)

func TestParseResponse(t *testing.T) {
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
		{`{"version":1,"ttl_seconds":300,"nodes":[{"addr":"0.0.0.0:443"}]}`, false},
		{`{"version":1,"ttl_seconds":300,"nodes":[{"addr":"192.0.2.1:443","protocols":["spdy"]}]}`, false},
		{`[`, false},
	}
	for _, c := range cases {
		r, err := ParseResponse([]byte(c.body))
		if (err == nil) != c.ok {
			t.Errorf("%s: err = %v, want ok %v", c.body, err, c.ok)
		}
		if err != nil && !errors.Is(err, ErrResponse) {
			t.Errorf("%s: err %v does not wrap ErrResponse", c.body, err)
		}
		if err == nil && len(r.Nodes) == 0 {
			t.Errorf("%s: no nodes", c.body)
		}
	}
}

func TestNodeOffers(t *testing.T) {
	all, h2 := Node{}, Node{Protocols: []string{"h2"}}
	if !all.Offers("h3") || !h2.Offers("h2") || h2.Offers("h3") {
		t.Fatalf("Offers: all h3 %v, h2 h2 %v, h2 h3 %v; want true true false", all.Offers("h3"), h2.Offers("h2"), h2.Offers("h3"))
	}
}

// FuzzParseResponse: the parser never panics, and whatever it accepts is
// usable: 1..MaxNodes nodes with ip:port addresses and a bounded TTL.
func FuzzParseResponse(f *testing.F) {
	f.Add([]byte(`{"version":1,"ttl_seconds":300,"nodes":[{"addr":"192.0.2.1:443","protocols":["h3","h2"]}]}`))
	f.Add([]byte(`{"version":1,"ttl_seconds":86400,"nodes":[{"addr":"[::ffff:1.2.3.4]:1"}]}`))
	f.Add([]byte(`{"version":1,"nodes":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseResponse(data)
		if err != nil {
			if !errors.Is(err, ErrResponse) {
				t.Fatalf("error %v does not wrap ErrResponse", err)
			}
			return
		}
		if len(r.Nodes) == 0 || len(r.Nodes) > MaxNodes || r.TTLSeconds < 0 || r.TTLSeconds > MaxTTLSeconds {
			t.Fatalf("accepted %+v", r)
		}
		for _, n := range r.Nodes {
			ap, err := netip.ParseAddrPort(n.Addr)
			if err != nil || ap.Port() == 0 || !UsableAddr(ap.Addr().Unmap()) {
				t.Fatalf("accepted node %q: %v", n.Addr, err)
			}
			for _, p := range n.Protocols {
				if !KnownProtocol(p) {
					t.Fatalf("accepted protocol %q", p)
				}
			}
		}
	})
}
