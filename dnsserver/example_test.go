package dnsserver_test

import (
	"fmt"
	"net"
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

// The access nodes' health as the checks see it: a node whose check port
// refuses connections is down after the first round.
func ExampleServer_NodeHealth() {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	var cfg dnsserver.Config
	err := config.Parse([]byte(`
zones:
  - origin: example.test.
    access:
      - name: api
        nodes:
          - {addr: 192.0.2.11, check: "tcp://`+dead+`"}
          - {addr: 192.0.2.12}
`), "dns.yaml", &cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	round := make(chan struct{}, 1)
	s, err := dnsserver.New(cfg, dnsserver.Options{Registerer: prometheus.NewRegistry(), Logger: obs.Discard,
		OnHealthRound: func(map[string]bool) {
			select {
			case round <- struct{}{}:
			default:
			}
		}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	<-round
	for _, n := range s.NodeHealth() {
		fmt.Println(n.Domain, n.Addr, "probed", n.Probed, "up", n.Up)
	}
	// Output:
	// api.example.test 192.0.2.11 probed true up false
	// api.example.test 192.0.2.12 probed false up true
}
