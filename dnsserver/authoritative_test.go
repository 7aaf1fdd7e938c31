package dnsserver

import (
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// TestAuthoritative asks real packets over UDP and TCP and checks rcode,
// flags, every section and the TTLs.
func TestAuthoritative(t *testing.T) {
	s := startServer(t, parseConfig(t, testZone), Options{})
	soa := "example.test.\t60\tIN\tSOA\tns1.example.test. hostmaster.example.test. 7 3600 600 86400 60"
	cases := []struct {
		name   string
		qname  string
		qtype  uint16
		rcode  int
		aa     bool
		answer []string
		ns     []string
	}{
		{"A with two records", "www.example.test.", dns.TypeA, dns.RcodeSuccess, true,
			[]string{"www.example.test.\t60\tIN\tA\t192.0.2.10", "www.example.test.\t60\tIN\tA\t192.0.2.11"}, nil},
		{"case-insensitive name", "WwW.ExAmple.TEST.", dns.TypeA, dns.RcodeSuccess, true,
			[]string{"www.example.test.\t60\tIN\tA\t192.0.2.10", "www.example.test.\t60\tIN\tA\t192.0.2.11"}, nil},
		{"AAAA", "www.example.test.", dns.TypeAAAA, dns.RcodeSuccess, true,
			[]string{"www.example.test.\t60\tIN\tAAAA\t2001:db8::10"}, nil},
		{"apex A with its own TTL", "example.test.", dns.TypeA, dns.RcodeSuccess, true,
			[]string{"example.test.\t120\tIN\tA\t192.0.2.1"}, nil},
		{"SOA", "example.test.", dns.TypeSOA, dns.RcodeSuccess, true,
			[]string{"example.test.\t300\tIN\tSOA\tns1.example.test. hostmaster.example.test. 7 3600 600 86400 60"}, nil},
		{"NS with the zone TTL", "example.test.", dns.TypeNS, dns.RcodeSuccess, true,
			[]string{"example.test.\t300\tIN\tNS\tns1.example.test.", "example.test.\t300\tIN\tNS\tns2.example.test."}, nil},
		{"TXT", "txt.example.test.", dns.TypeTXT, dns.RcodeSuccess, true,
			[]string{"txt.example.test.\t30\tIN\tTXT\t\"hello world\""}, nil},
		{"MX", "mail.example.test.", dns.TypeMX, dns.RcodeSuccess, true,
			[]string{"mail.example.test.\t300\tIN\tMX\t10 mx.example.test."}, nil},
		{"CNAME followed in zone", "alias.example.test.", dns.TypeA, dns.RcodeSuccess, true,
			[]string{"alias.example.test.\t300\tIN\tCNAME\twww.example.test.", "www.example.test.\t60\tIN\tA\t192.0.2.10", "www.example.test.\t60\tIN\tA\t192.0.2.11"}, nil},
		{"CNAME chain", "chain.example.test.", dns.TypeAAAA, dns.RcodeSuccess, true,
			[]string{"chain.example.test.\t300\tIN\tCNAME\talias.example.test.", "alias.example.test.\t300\tIN\tCNAME\twww.example.test.", "www.example.test.\t60\tIN\tAAAA\t2001:db8::10"}, nil},
		{"CNAME asked for itself", "alias.example.test.", dns.TypeCNAME, dns.RcodeSuccess, true,
			[]string{"alias.example.test.\t300\tIN\tCNAME\twww.example.test."}, nil},
		{"CNAME to a missing name is NXDOMAIN (RFC 6604)", "dangling.example.test.", dns.TypeA, dns.RcodeNameError, true,
			[]string{"dangling.example.test.\t300\tIN\tCNAME\tnothing.example.test."}, []string{soa}},
		{"CNAME out of our zones stops", "out.example.test.", dns.TypeA, dns.RcodeSuccess, true,
			[]string{"out.example.test.\t300\tIN\tCNAME\twww.elsewhere.test."}, nil},
		{"NXDOMAIN with SOA", "nope.example.test.", dns.TypeA, dns.RcodeNameError, true, nil, []string{soa}},
		{"NXDOMAIN below a leaf", "x.www.example.test.", dns.TypeA, dns.RcodeNameError, true, nil, []string{soa}},
		{"NODATA with SOA", "www.example.test.", dns.TypeTXT, dns.RcodeSuccess, true, nil, []string{soa}},
		{"empty non-terminal is NODATA", "b.deep.example.test.", dns.TypeA, dns.RcodeSuccess, true, nil, []string{soa}},
		{"deep name", "a.b.deep.example.test.", dns.TypeA, dns.RcodeSuccess, true,
			[]string{"a.b.deep.example.test.\t300\tIN\tA\t192.0.2.20"}, nil},
		{"ANY gets the RFC 8482 answer", "www.example.test.", dns.TypeANY, dns.RcodeSuccess, true,
			[]string{"www.example.test.\t60\tIN\tHINFO\t\"RFC8482\" \"\""}, nil},
		{"outside the zones: REFUSED, no recursion", "www.google.com.", dns.TypeA, dns.RcodeRefused, false, nil, nil},
		{"root: REFUSED", ".", dns.TypeNS, dns.RcodeRefused, false, nil, nil},
		{"AXFR: REFUSED", "example.test.", dns.TypeAXFR, dns.RcodeRefused, false, nil, nil},
	}
	for _, network := range []string{"udp", "tcp"} {
		for _, c := range cases {
			t.Run(network+"/"+c.name, func(t *testing.T) {
				r := ask(t, network, s.Addr(), c.qname, c.qtype, 1232)
				if r.Rcode != c.rcode || r.Authoritative != c.aa || r.RecursionAvailable || r.Truncated {
					t.Errorf("rcode %s aa %v ra %v tc %v, want rcode %s aa %v ra false tc false",
						dns.RcodeToString[r.Rcode], r.Authoritative, r.RecursionAvailable, r.Truncated, dns.RcodeToString[c.rcode], c.aa)
				}
				got := rrStrings(r.Answer)
				for i := range got { // names may take the question's letter case
					got[i] = strings.ToLower(got[i])
				}
				slices.Sort(got)
				want := slices.Clone(c.answer)
				for i := range want {
					want[i] = strings.ToLower(want[i])
				}
				slices.Sort(want)
				if !slices.Equal(got, want) {
					t.Errorf("answer\n got %q\nwant %q", got, want)
				}
				if ns := rrStrings(r.Ns); !slices.Equal(ns, c.ns) {
					t.Errorf("authority\n got %q\nwant %q", ns, c.ns)
				}
				if opt := r.IsEdns0(); opt == nil || opt.UDPSize() != DefaultUDPSize {
					t.Errorf("OPT %v, want one with UDP size %d", opt, DefaultUDPSize)
				}
				if len(r.Question) != 1 || !strings.EqualFold(r.Question[0].Name, c.qname) {
					t.Errorf("question %v, want %s", r.Question, c.qname)
				}
			})
		}
	}
}

// TestProtocolErrors covers what is not a plain question.
func TestProtocolErrors(t *testing.T) {
	s := startServer(t, parseConfig(t, testZone), Options{})
	t.Run("NOTIFY opcode is NOTIMP", func(t *testing.T) {
		q := new(dns.Msg)
		q.SetNotify("example.test.")
		if r := exchange(t, "udp", s.Addr(), q); r.Rcode != dns.RcodeNotImplemented {
			t.Errorf("rcode %s, want NOTIMP", dns.RcodeToString[r.Rcode])
		}
	})
	t.Run("EDNS version 1 is BADVERS", func(t *testing.T) {
		q := new(dns.Msg)
		q.SetQuestion("www.example.test.", dns.TypeA)
		q.SetEdns0(1232, false)
		q.IsEdns0().SetVersion(1)
		r := exchange(t, "udp", s.Addr(), q)
		if r.Rcode != dns.RcodeBadVers || len(r.Answer) != 0 {
			t.Errorf("rcode %s answers %d, want BADVERS and none", dns.RcodeToString[r.Rcode], len(r.Answer))
		}
	})
	t.Run("CHAOS class is REFUSED", func(t *testing.T) {
		q := new(dns.Msg)
		q.SetQuestion("version.bind.", dns.TypeTXT)
		q.Question[0].Qclass = dns.ClassCHAOS
		if r := exchange(t, "udp", s.Addr(), q); r.Rcode != dns.RcodeRefused {
			t.Errorf("rcode %s, want REFUSED", dns.RcodeToString[r.Rcode])
		}
	})
	t.Run("no question is FORMERR", func(t *testing.T) {
		q := new(dns.Msg)
		q.Id = dns.Id()
		q.Question = nil
		c := &dns.Client{Net: "tcp"}
		r, _, err := c.Exchange(q, s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if r.Rcode != dns.RcodeFormatError {
			t.Errorf("rcode %s, want FORMERR", dns.RcodeToString[r.Rcode])
		}
	})
	t.Run("no EDNS: no OPT in the answer", func(t *testing.T) {
		r := ask(t, "udp", s.Addr(), "www.example.test.", dns.TypeA, 0)
		if r.IsEdns0() != nil || len(r.Answer) != 2 {
			t.Errorf("OPT %v answers %d, want none and 2", r.IsEdns0(), len(r.Answer))
		}
	})
}
