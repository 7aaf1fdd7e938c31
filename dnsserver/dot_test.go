package dnsserver

import (
	"crypto/tls"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/veerhq/veer/dnsserver/internal/dnstest"
)

// TestDoT serves DNS over TLS (RFC 7858) and asks with kdig and with a Go
// TLS client verifying the certificate.
func TestDoT(t *testing.T) {
	kdig := tool(t, "kdig", "knot-dnsutils")
	cert, err := dnstest.WriteCert(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg := parseConfig(t, testZone)
	cfg.DoTListen = "127.0.0.1:0"
	cfg.TLS = TLSConfig{Cert: cert.CertFile, Key: cert.KeyFile}
	s := startServer(t, cfg, Options{})
	dot := s.DoTAddr()

	out := run(t, kdig, "@"+dot.Addr().String(), "-p"+strconv.Itoa(int(dot.Port())), "+tls", "+norec", "+time=5", "+retry=0", "www.example.test.", "A")
	if !strings.Contains(out, "status: NOERROR") || !strings.Contains(out, "TLS") {
		t.Errorf("kdig +tls:\n%s", out)
	}
	if got := answerLines(out, "www.example.test."); !slices.Equal(got, wwwA) {
		t.Errorf("kdig +tls: %q, want %q", got, wwwA)
	}

	c := &dns.Client{Net: "tcp-tls", Timeout: 5 * time.Second, TLSConfig: &tls.Config{RootCAs: cert.Pool, ServerName: "dns.test"}}
	conn, err := c.Dial(dot.String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Several queries on one connection, as RFC 7858 clients do.
	for _, name := range []string{"www.example.test.", "txt.example.test.", "nope.example.test."} {
		q := new(dns.Msg)
		q.SetQuestion(name, dns.TypeA)
		r, _, err := c.ExchangeWithConn(q, conn)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]int{"www.example.test.": 2}[name]; len(r.Answer) != want || r.Id != q.Id {
			t.Errorf("%s: %d answers id %d, want %d id %d", name, len(r.Answer), r.Id, want, q.Id)
		}
	}
	if got := testutilCount(s, DoT); got != 4 {
		t.Errorf("queries{transport=dot} = %v, want 4", got)
	}
}
