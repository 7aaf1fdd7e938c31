// Package dns holds the pieces of `make bench-dns`: one zone written for
// veer dns, NSD and Knot, a dnsperf query file, the servers started on
// loopback in a temp dir, dnsperf runs and their parsed results.
package dns

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// Origin is the benchmark zone.
const Origin = "bench.test."

// Zone is a generated zone of Names hosts, each with an A record, every
// 4th with an AAAA and every 10th with a TXT.
type Zone struct {
	Names int
}

func (z Zone) records() []string {
	out := []string{"ns1 3600 A 127.0.0.1"}
	for i := range z.Names {
		out = append(out, fmt.Sprintf("host%d 300 A 10.%d.%d.%d", i, i>>16&255, i>>8&255, i&255))
		if i%4 == 0 {
			out = append(out, fmt.Sprintf("host%d 300 AAAA 2001:db8::%x", i, i))
		}
		if i%10 == 0 {
			out = append(out, fmt.Sprintf("host%d 300 TXT \"bench host %d\"", i, i))
		}
	}
	return out
}

const soa = "ns1.bench.test. hostmaster.bench.test. 1 3600 600 86400 60"

// VeerConfig is the zone as a `veer dns` config file listening on addr.
func (z Zone) VeerConfig(addr string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "listen: %s\namplification: 100\nzones:\n  - origin: %s\n    ttl: 3600\n    soa: %s\n    ns: [ns1.bench.test.]\n    records:\n", addr, Origin, soa)
	for _, r := range z.records() {
		fmt.Fprintf(&b, "      - '%s'\n", r)
	}
	return b.String()
}

// ZoneFile is the zone in RFC 1035 master file format (NSD, Knot).
func (z Zone) ZoneFile() string {
	var b strings.Builder
	fmt.Fprintf(&b, "$ORIGIN %s\n$TTL 3600\n@ SOA %s\n@ NS ns1.bench.test.\n", Origin, soa)
	for _, r := range z.records() {
		b.WriteString(r + "\n")
	}
	return b.String()
}

// Queries is a dnsperf query file of n lines: 80% A of existing hosts, 10%
// AAAA (half of them NODATA), 5% TXT, 5% NXDOMAIN; the same for a seed.
func (z Zone) Queries(n int, seed uint64) string {
	r := rand.New(rand.NewPCG(seed, 0))
	var b strings.Builder
	for range n {
		h := r.IntN(z.Names)
		switch p := r.IntN(100); {
		case p < 80:
			fmt.Fprintf(&b, "host%d.%s A\n", h, Origin)
		case p < 90:
			fmt.Fprintf(&b, "host%d.%s AAAA\n", h, Origin)
		case p < 95:
			fmt.Fprintf(&b, "host%d.%s TXT\n", h-h%10, Origin)
		default:
			fmt.Fprintf(&b, "missing%d.%s A\n", h, Origin)
		}
	}
	return b.String()
}
