package dnsserver

import (
	"fmt"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// glueZone has an MX set whose answer fits in 512 bytes but whose glue
// (8 hosts with an A and an AAAA each) does not.
func glueZone(extra string) string {
	var b strings.Builder
	b.WriteString("listen: 127.0.0.1:0\nudp_workers: 1\n" + extra + "zones:\n  - origin: example.test.\n    records:\n")
	for i := range 8 {
		fmt.Fprintf(&b, "      - 'mail MX %d mx%02d'\n", i, i)
		fmt.Fprintf(&b, "      - 'mx%02d A 192.0.2.%d'\n", i, i+1)
		fmt.Fprintf(&b, "      - 'mx%02d AAAA 2001:db8::%d'\n", i, i+1)
	}
	return b.String()
}

// TestGlueLeftOutBeforeTC: additional records are optional (RFC 2181
// section 9). When the answer fits the client's size but its glue does
// not, the glue is left out and TC stays clear; the trimmed answer is not
// cached, so a client with room (EDNS0, TCP) still gets the glue. The same
// when the amplification bound, not the size, is what the glue exceeds.
func TestGlueLeftOutBeforeTC(t *testing.T) {
	for _, c := range []struct {
		name, extra string
	}{
		{"size", "amplification: 100\n"},
		{"amplification", "amplification: 8\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := startServer(t, parseConfig(t, glueZone(c.extra)), Options{})
			for round := range 2 {
				edns := 0 // 512 bytes
				if c.name == "amplification" {
					edns = 1232 // room, but not within 8x the query
				}
				small := ask(t, "udp", s.Addr(), "mail.example.test.", dns.TypeMX, edns)
				if small.Truncated || len(small.Answer) != 8 || len(rrStrings(small.Extra)) != 0 {
					t.Errorf("round %d, small: tc %v, %d answers, %d additional; want no tc, 8, 0",
						round, small.Truncated, len(small.Answer), len(rrStrings(small.Extra)))
				}
				full := ask(t, "tcp", s.Addr(), "mail.example.test.", dns.TypeMX, 1232)
				if full.Truncated || len(full.Answer) != 8 || len(rrStrings(full.Extra)) != 16 {
					t.Errorf("round %d, TCP: tc %v, %d answers, %d additional; want no tc, 8, 16",
						round, full.Truncated, len(full.Answer), len(rrStrings(full.Extra)))
				}
			}
			// Each answer counted once, however often it was packed.
			if u, c := testutilCount(s, UDP), testutilCount(s, TCP); u != 2 || c != 2 {
				t.Errorf("counted %v UDP and %v TCP answers, want 2 and 2", u, c)
			}
		})
	}
}
