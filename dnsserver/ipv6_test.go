package dnsserver

import (
	"testing"

	"github.com/miekg/dns"
)

// TestIPv6Listener serves on [::1]: the UDP batch path on an IPv6 socket,
// and TCP; the region of an IPv6 client comes from its address.
func TestIPv6Listener(t *testing.T) {
	cfg := parseConfig(t, testZone+`    access:
      - name: api
        nodes: [{addr: 192.0.2.1, region: v6}, {addr: 192.0.2.2, region: v4}]
regions: [{cidr: "::1/128", region: v6}, {cidr: 127.0.0.0/8, region: v4}]
`)
	cfg.Listen = "[::1]:0"
	s := startServer(t, cfg, Options{})
	for _, network := range []string{"udp", "tcp"} {
		r := ask(t, network, s.Addr(), "api.example.test.", dns.TypeA, 0)
		if len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "192.0.2.1" {
			t.Errorf("%s over IPv6: %v, want the v6 region's 192.0.2.1", network, r.Answer)
		}
	}
}
