package dnsserver_test

import (
	"fmt"
	"net/netip"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/dnsserver"
	"github.com/veerhq/veer/obs"
)

// A zone from YAML, asked through Answer (what the UDP, TCP, DoT and DoH
// transports call) without opening a socket.
func Example() {
	var cfg dnsserver.Config
	err := config.Parse([]byte(`
zones:
  - origin: example.test.
    records:
      - "www 60 A 192.0.2.10"
      - "login CNAME www"
`), "dns.yaml", &cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	s, err := dnsserver.New(cfg, dnsserver.Options{Registerer: prometheus.NewRegistry(), Logger: obs.Discard})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	for _, name := range []string{"login.example.test.", "nope.example.test.", "example.org."} {
		q := new(dns.Msg)
		q.SetQuestion(name, dns.TypeA)
		wire, _ := q.Pack()
		out, _ := s.Answer(wire, netip.MustParseAddr("192.0.2.99"), dnsserver.UDP, nil)
		var r dns.Msg
		_ = r.Unpack(out)
		fmt.Printf("%s %s aa=%v answers=%d authority=%d\n", name, dns.RcodeToString[r.Rcode], r.Authoritative, len(r.Answer), len(r.Ns))
	}
	// Output:
	// login.example.test. NOERROR aa=true answers=2 authority=0
	// nope.example.test. NXDOMAIN aa=true answers=0 authority=1
	// example.org. REFUSED aa=false answers=0 authority=0
}

// Invalid data names the field and its line; the server is not built.
func ExampleNew_invalid() {
	var cfg dnsserver.Config
	err := config.Parse([]byte(`
zones:
  - origin: example.test.
    records:
      - "www A 192.0.2.10"
      - "www CNAME elsewhere.test."
`), "dns.yaml", &cfg)
	fmt.Println(err)
	// Output:
	// dns.yaml:6: zones[0].records[1]: conflicting record: CNAME at www.example.test., which has other data
}
