package dnsserver

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// nsdZone is one zone served by both veer and NSD in TestSameAsNSD: the
// records are written once, as zone-file lines relative to the origin.
type zoneData struct {
	origin, soa string
	ns          []string
	records     []string
}

var nsdZone = zoneData{
	origin: "example.test.",
	soa:    "ns1.example.test. hostmaster.example.test. 7 3600 600 86400 60",
	ns:     []string{"ns1.example.test.", "ns2.example.test.", "ns.elsewhere.test."},
	records: []string{
		"@ 300 A 192.0.2.1",
		"www 60 A 192.0.2.10",
		"www 60 A 192.0.2.11",
		"www 60 AAAA 2001:db8::10",
		"alias 300 CNAME www",
		"chain 300 CNAME alias",
		"ns1 300 A 192.0.2.53",
		"ns1 300 AAAA 2001:db8::53",
		"mail 300 MX 10 mx",
		"mail 300 MX 20 mx2",
		"mail 300 MX 30 mx.elsewhere.test.",
		"mail 300 MX 40 mx", // the same target twice: its glue once
		"mx 300 A 192.0.2.25",
		"mx2 300 AAAA 2001:db8::26",
		"mxalias 300 CNAME mail",
		"nomx 300 MX 10 nothing", // a target without records: no glue
		"_sip._tcp 300 SRV 10 5 5060 sip",
		"_sip._tcp 300 SRV 20 5 5060 www",
		"sip 300 AAAA 2001:db8::5",
		"txt 300 TXT \"hello\"",
		"a.b.deep 300 A 192.0.2.20",
	},
}

func (z zoneData) veerConfig() string {
	var b strings.Builder
	fmt.Fprintf(&b, "listen: 127.0.0.1:0\nudp_workers: 1\nzones:\n  - origin: %s\n    ttl: 300\n    soa: %s\n    ns: [%s]\n    records:\n",
		z.origin, z.soa, strings.Join(z.ns, ", "))
	for _, r := range z.records {
		fmt.Fprintf(&b, "      - %q\n", r)
	}
	return b.String()
}

func (z zoneData) zoneFile() string {
	var b strings.Builder
	fmt.Fprintf(&b, "$ORIGIN %s\n$TTL 300\n@ IN SOA %s\n", z.origin, z.soa)
	for _, n := range z.ns {
		fmt.Fprintf(&b, "@ IN NS %s\n", n)
	}
	for _, r := range z.records {
		f := strings.Fields(r)
		// name ttl type data -> name ttl IN type data
		fmt.Fprintf(&b, "%s %s IN %s\n", f[0], f[1], strings.Join(f[2:], " "))
	}
	return b.String()
}

// startNSD runs NSD (the Debian package nsd) for one zone file on a free
// loopback port in a temp dir, with its default settings but response rate
// limiting (which would drop a test's burst), and stops it at cleanup. It
// is ready when it logs "nsd started" on its standard error.
func startNSD(t *testing.T, origin, zoneFile string) netip.AddrPort {
	t.Helper()
	bin := tool(t, "nsd", "nsd")
	d := t.TempDir()
	if err := os.WriteFile(filepath.Join(d, "zone"), []byte(zoneFile), 0o644); err != nil {
		t.Fatal(err)
	}
	var last string
	for range 5 { // a port found free can be taken again before NSD binds it
		addr := freeUDPTCP(t)
		conf := fmt.Sprintf(`server:
  ip-address: %s
  port: %d
  server-count: 1
  username: ""
  chroot: ""
  zonesdir: %q
  database: ""
  zonelistfile: "%s/zone.list"
  xfrdfile: "%s/xfrd.state"
  xfrdir: %q
  pidfile: "%s/nsd.pid"
  verbosity: 0
  rrl-ratelimit: 0
  rrl-whitelist-ratelimit: 0
remote-control:
  control-enable: no
zone:
  name: %s
  zonefile: zone
`, addr.Addr(), addr.Port(), d, d, d, d, d, origin)
		cf := filepath.Join(d, "nsd.conf")
		if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "-d", "-c", cf)
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
		started := false
		var log []string
		for l := range lines {
			log = append(log, l)
			if strings.Contains(l, "nsd started") {
				started = true
				break
			}
		}
		if started {
			go func() { // keep draining what NSD logs until it exits
				for range lines {
				}
			}()
			t.Cleanup(func() {
				cmd.Process.Signal(os.Interrupt)
				done := make(chan struct{})
				go func() { cmd.Wait(); close(done) }()
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					cmd.Process.Kill()
					<-done
				}
			})
			return addr
		}
		cmd.Wait()
		last = strings.Join(log, "\n")
		if !strings.Contains(last, "in use") {
			break
		}
	}
	t.Fatalf("nsd did not start:\n%s", last)
	return netip.AddrPort{}
}

// freeUDPTCP returns a loopback address whose port is free for UDP and TCP.
func freeUDPTCP(t *testing.T) netip.AddrPort {
	t.Helper()
	for range 20 {
		u, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		a := u.LocalAddr().(*net.UDPAddr).AddrPort()
		l, err := net.Listen("tcp", a.String())
		u.Close()
		if err == nil {
			l.Close()
			return a
		}
	}
	t.Fatal("no free loopback port for UDP and TCP")
	return netip.AddrPort{}
}

// TestSameAsNSD serves one zone from veer and from NSD 4 (started by the
// test) and asks both the same questions, in mixed letter case (0x20) and
// in lower case, twice each (veer's second answer comes from its answer
// cache), with and without EDNS0. The answers must agree byte for byte in
// their names' letter case:
//   - rcode, AA and the answer section (records as text, so names in the
//     case each server wrote them; sets compared as sets);
//   - the authority section of negative answers (the SOA, its owner and
//     names in the query's case where they share its suffix);
//   - the additional section: A and AAAA of the in-zone targets of MX, SRV
//     and NS answers. NSD also puts the zone's NS set in the authority
//     section of every positive answer (veer does not: minimal answers,
//     as Knot) and their glue in the additional section; those records
//     are left out of NSD's side before comparing. The one difference in
//     letter case: the owners of an SRV answer's glue (see below).
func TestSameAsNSD(t *testing.T) {
	nsd := startNSD(t, nsdZone.origin, nsdZone.zoneFile())
	veer := startServer(t, parseConfig(t, nsdZone.veerConfig()), Options{}).Addr()
	questions := []struct {
		name  string
		qtype uint16
	}{
		{"WwW.ExAmPlE.TeSt.", dns.TypeA},
		{"www.EXAMPLE.test.", dns.TypeAAAA},
		{"ExAmPlE.TeSt.", dns.TypeA},
		{"eXaMpLe.TeSt.", dns.TypeSOA},
		{"Example.Test.", dns.TypeNS},
		{"AlIaS.example.TEST.", dns.TypeA},
		{"CHAIN.Example.Test.", dns.TypeAAAA},
		{"MaIl.ExAmPlE.tEsT.", dns.TypeMX},
		{"MxAlIaS.example.test.", dns.TypeMX},
		{"NoMx.EXAMPLE.TEST.", dns.TypeMX},
		{"_SIP._TCP.Example.Test.", dns.TypeSRV},
		{"TXT.example.test.", dns.TypeTXT},
		{"A.B.Deep.Example.Test.", dns.TypeA},
		{"NoPe.ExAmPlE.TeSt.", dns.TypeA},   // NXDOMAIN
		{"WWW.example.TEST.", dns.TypeTXT},  // NODATA
		{"b.DEEP.example.test.", dns.TypeA}, // empty non-terminal
		{"x.WWW.Example.Test.", dns.TypeMX}, // NXDOMAIN below a leaf
		{"Sip.Example.Test.", dns.TypeA},    // NODATA beside an AAAA
		{"Mx2.EXAMPLE.test.", dns.TypeAAAA}, // a glue target asked itself
		{"NS1.example.test.", dns.TypeAAAA}, // ditto
		{"mail.example.test.", dns.TypeMX},  // lower case
		{"www.example.test.", dns.TypeA},    // lower case
		{"_sip._tcp.example.test.", dns.TypeSRV},
	}
	for _, q := range questions {
		for _, name := range []string{q.name, strings.ToLower(q.name), q.name} {
			for _, edns := range []int{0, 1232} {
				label := fmt.Sprintf("%s %s edns=%d", name, dns.TypeToString[q.qtype], edns)
				want := ask(t, "udp", nsd, name, q.qtype, edns)
				got := ask(t, "udp", veer, name, q.qtype, edns)
				if got.Rcode != want.Rcode || got.Authoritative != want.Authoritative || got.Truncated || want.Truncated {
					t.Errorf("%s: rcode %s aa %v tc %v, NSD %s aa %v tc %v", label,
						dns.RcodeToString[got.Rcode], got.Authoritative, got.Truncated,
						dns.RcodeToString[want.Rcode], want.Authoritative, want.Truncated)
				}
				if g, w := sortedRRs(got.Answer), sortedRRs(want.Answer); !slices.Equal(g, w) {
					t.Errorf("%s: answer\n%s\nNSD:\n%s", label, strings.Join(g, "\n"), strings.Join(w, "\n"))
				}
				if len(want.Answer) == 0 {
					if g, w := sortedRRs(got.Ns), sortedRRs(want.Ns); !slices.Equal(g, w) {
						t.Errorf("%s: authority\n%s\nNSD:\n%s", label, strings.Join(g, "\n"), strings.Join(w, "\n"))
					}
				}
				g, w := sortedRRs(got.Extra), sortedRRs(answerGlue(want))
				if q.qtype == dns.TypeSRV {
					// miekg/dns writes an SRV target in full (not compressed,
					// RFC 2782) and compresses the glue's owner into it, so the
					// glue's owner takes the target's case; NSD points it into
					// the question. Letter case aside, they must agree.
					g, w = lowerAll(g), lowerAll(w)
				}
				if !slices.Equal(g, w) {
					t.Errorf("%s: additional\n%s\nNSD (its authority NS glue left out):\n%s", label, strings.Join(g, "\n"), strings.Join(w, "\n"))
				}
			}
		}
	}
}

// answerGlue returns the additional records of m whose owner is the target
// of a record in m's answer section (NSD also adds its authority NS glue).
func answerGlue(m *dns.Msg) []dns.RR {
	targets := map[string]bool{}
	for _, rr := range m.Answer {
		if t := glueTarget(rr); t != "" {
			targets[strings.ToLower(t)] = true
		}
	}
	var out []dns.RR
	for _, rr := range m.Extra {
		if targets[strings.ToLower(rr.Header().Name)] {
			out = append(out, rr)
		}
	}
	return out
}

// sortedRRs renders records as text (names in the case they came in),
// without OPT, sorted.
func sortedRRs(rrs []dns.RR) []string {
	out := rrStrings(rrs)
	slices.Sort(out)
	return out
}

// TestDigKeepsCase asks ISC dig in mixed case: the answer's owner names,
// and the names that share the question's suffix, come back in the case
// asked, from the full path and from the cache, over UDP and TCP.
func TestDigKeepsCase(t *testing.T) {
	dig := tool(t, "dig", "dnsutils")
	s := startServer(t, parseConfig(t, testZone), Options{})
	at, port := "@"+s.Addr().Addr().String(), "-p"+strconv.Itoa(int(s.Addr().Port()))
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"WwW.ExAmPlE.TeSt", "A"}, []string{"WwW.ExAmPlE.TeSt. 60 IN A 192.0.2.10", "WwW.ExAmPlE.TeSt. 60 IN A 192.0.2.11"}},
		{[]string{"AlIaS.example.TEST", "A"}, []string{"AlIaS.example.TEST. 300 IN CNAME www.example.TEST.", "www.example.TEST. 60 IN A 192.0.2.10", "www.example.TEST. 60 IN A 192.0.2.11"}},
		{[]string{"MAIL.Example.Test", "MX"}, []string{"MAIL.Example.Test. 300 IN MX 10 mx.Example.Test."}},
		{[]string{"NoPe.ExAmPlE.TeSt", "A"}, []string{"ExAmPlE.TeSt. 60 IN SOA ns1.ExAmPlE.TeSt. hostmaster.ExAmPlE.TeSt. 7 3600 600 86400 60"}},
	} {
		for _, tcp := range []string{"+notcp", "+tcp"} {
			for round := range 2 { // the second from the answer cache (UDP and TCP)
				out := run(t, dig, append([]string{at, port, "+norec", "+time=5", "+tries=1", tcp, "+noall", "+answer", "+authority"}, c.args...)...)
				var got []string
				for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
					if f := strings.Fields(l); len(f) > 0 {
						got = append(got, strings.Join(f, " "))
					}
				}
				slices.Sort(got)
				if !slices.Equal(got, c.want) {
					t.Errorf("dig %s %s (round %d):\n%s\nwant:\n%s", tcp, strings.Join(c.args, " "), round, strings.Join(got, "\n"), strings.Join(c.want, "\n"))
				}
			}
		}
	}
}

func lowerAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strings.ToLower(s)
	}
	return out
}
