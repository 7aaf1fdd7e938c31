package dnsserver

import (
	"context"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/lastmile"
	"github.com/veerhq/veer/obs"
)

// tool returns the path of a client program we did not write; a missing one
// fails the test (never a skip) and says how to install it.
func tool(t testing.TB, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found: run scripts/test-deps.sh (Debian package %s)", name, pkg)
	}
	return p
}

func run(t testing.TB, prog string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, prog, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", prog, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// answerLines returns the lines of out that are records of owner, with
// whitespace collapsed: "www.example.test. 60 IN A 192.0.2.10".
func answerLines(out, owner string) []string {
	var got []string
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= 5 && f[0] == owner && !strings.HasPrefix(l, ";") {
			got = append(got, strings.Join(f, " "))
		}
	}
	slices.Sort(got)
	return got
}

var wwwA = []string{"www.example.test. 60 IN A 192.0.2.10", "www.example.test. 60 IN A 192.0.2.11"}

// TestDig asks with ISC dig over UDP and TCP.
func TestDig(t *testing.T) {
	dig := tool(t, "dig", "dnsutils")
	s := startServer(t, parseConfig(t, bigZone("")+"      - 'alias CNAME www'\n"), Options{})
	at, port := "@"+s.Addr().Addr().String(), "-p"+strconv.Itoa(int(s.Addr().Port()))
	for _, c := range []struct {
		name  string
		args  []string
		want  []string // substrings
		lines []string // records of www.example.test.
	}{
		{"UDP A", []string{"www.example.test.", "A"}, []string{"status: NOERROR", "flags: qr aa;", "udp: 1232"}, []string{"www.example.test. 300 IN A 192.0.2.10"}},
		{"TCP A", []string{"+tcp", "www.example.test.", "A"}, []string{"status: NOERROR", "flags: qr aa;"}, []string{"www.example.test. 300 IN A 192.0.2.10"}},
		{"CNAME", []string{"alias.example.test.", "A"}, []string{"alias.example.test.\t300\tIN\tCNAME\twww.example.test."}, []string{"www.example.test. 300 IN A 192.0.2.10"}},
		{"NXDOMAIN", []string{"nope.example.test.", "A"}, []string{"status: NXDOMAIN", "flags: qr aa;", "IN\tSOA\tns1.example.test. hostmaster.example.test. 1 3600 600 86400 60"}, nil},
		{"REFUSED", []string{"example.org.", "A"}, []string{"status: REFUSED"}, nil},
		{"big TXT: dig retries over TCP on TC", []string{"big.example.test.", "TXT"}, []string{"Truncated, retrying in TCP mode", "ANSWER: 40,"}, nil},
		{"big TXT without EDNS", []string{"+noedns", "+ignore", "big.example.test.", "TXT"}, []string{"flags: qr aa tc;", "status: NOERROR"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{at, port, "+norec", "+time=5", "+tries=1"}, c.args...)
			out := run(t, dig, args...)
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("dig output lacks %q:\n%s", w, out)
				}
			}
			if got := answerLines(out, "www.example.test."); !slices.Equal(got, c.lines) {
				t.Errorf("records %q, want %q\n%s", got, c.lines, out)
			}
		})
	}
}

// TestKdig asks with Knot's kdig over UDP and TCP (DoT and DoH in the
// transport tests).
func TestKdig(t *testing.T) {
	kdig := tool(t, "kdig", "knot-dnsutils")
	s := startServer(t, parseConfig(t, testZone), Options{})
	at, port := "@"+s.Addr().Addr().String(), "-p"+strconv.Itoa(int(s.Addr().Port()))
	for _, proto := range []string{"+notcp", "+tcp"} {
		out := run(t, kdig, at, port, proto, "+norec", "+time=5", "+retry=0", "www.example.test.", "A")
		if !strings.Contains(out, "status: NOERROR") || !strings.Contains(out, "Flags: qr aa;") {
			t.Errorf("%s: want NOERROR with qr aa:\n%s", proto, out)
		}
		if got := answerLines(out, "www.example.test."); !slices.Equal(got, wwwA) {
			t.Errorf("%s: records %q, want %q", proto, got, wwwA)
		}
		out = run(t, kdig, at, port, proto, "+norec", "nope.example.test.", "AAAA")
		if !strings.Contains(out, "status: NXDOMAIN") || !strings.Contains(out, "SOA\tns1.example.test.") {
			t.Errorf("%s: want NXDOMAIN with the SOA:\n%s", proto, out)
		}
	}
}

// TestGoResolver resolves through Go's own resolver (net.Resolver, pure Go)
// pointed at the server.
func TestGoResolver(t *testing.T) {
	s := startServer(t, parseConfig(t, testZone), Options{})
	for _, network := range []string{"udp", "tcp"} {
		r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, s.Addr().String())
		}}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		addrs, err := r.LookupNetIP(ctx, "ip", "alias.example.test")
		if err != nil {
			t.Fatalf("%s: %v", network, err)
		}
		slices.SortFunc(addrs, func(a, b netip.Addr) int { return a.Compare(b) })
		if want := []netip.Addr{netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("192.0.2.11"), netip.MustParseAddr("2001:db8::10")}; !slices.Equal(addrs, want) {
			t.Errorf("%s: %v, want %v", network, addrs, want)
		}
		txt, err := r.LookupTXT(ctx, "txt.example.test")
		if err != nil || !slices.Equal(txt, []string{"hello world"}) {
			t.Errorf("%s: TXT %q %v", network, txt, err)
		}
		_, err = r.LookupNetIP(ctx, "ip", "nope.example.test")
		var de *net.DNSError
		if !asDNSError(err, &de) || !de.IsNotFound {
			t.Errorf("%s: nope: %v, want not found", network, err)
		}
		cancel()
	}
}

func asDNSError(err error, de **net.DNSError) bool {
	e, ok := err.(*net.DNSError)
	*de = e
	return ok
}

// TestLastmileResolver is the client this server is for: lastmile's chain
// with the private DNS over UDP, and over UDP and TCP raced.
func TestLastmileResolver(t *testing.T) {
	s := startServer(t, parseConfig(t, testZone), Options{})
	for _, step := range []lastmile.ResolverStep{lastmile.StepPrivateUDP, lastmile.StepPrivateRace} {
		r, err := lastmile.NewResolver(lastmile.DNSConfig{
			Order:          []lastmile.ResolverStep{step},
			PrivateServers: []string{s.Addr().String()},
			Timeout:        5 * time.Second,
		}, lastmile.Options{Registerer: prometheus.NewRegistry(), Logger: obs.Discard})
		if err != nil {
			t.Fatal(err)
		}
		addrs, got, err := r.Resolve(context.Background(), "www.example.test")
		if err != nil || got != step {
			t.Fatalf("%s: step %s err %v", step, got, err)
		}
		want := []netip.Addr{netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("192.0.2.11"), netip.MustParseAddr("2001:db8::10")}
		slices.SortFunc(addrs, func(a, b netip.Addr) int { return a.Compare(b) })
		if !slices.Equal(addrs, want) {
			t.Errorf("%s: %v, want %v", step, addrs, want)
		}
		if _, _, err := r.Resolve(context.Background(), "nope.example.test"); err == nil {
			t.Errorf("%s: nope.example.test resolved", step)
		}
		r.Close()
	}
}
