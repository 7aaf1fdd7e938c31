package lastmile

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/miekg/dns"
	"github.com/veerhq/veer/outcome"
	"github.com/veerhq/veer/routing/schedule"
)

// Sentinel errors. Errors returned by the package wrap them together with an
// outcome.Kind (outcome.Wrap), so callers match with errors.Is and classify
// with outcome.ClassifyError.
var (
	// ErrNoAddress: the name exists but the answer holds no usable address
	// (NXDOMAIN is reported as ErrNXDomain).
	ErrNoAddress = errors.New("lastmile: no address in answer")
	// ErrNXDomain: the name does not exist.
	ErrNXDomain = errors.New("lastmile: no such domain")
	// ErrRcode: the server answered with an error code (SERVFAIL, REFUSED...).
	ErrRcode = errors.New("lastmile: DNS error response")
	// ErrTruncated: a UDP answer was truncated and no TCP answer came.
	ErrTruncated = errors.New("lastmile: truncated DNS answer")
	// ErrHijacked: an answer holds an address outside the expected ranges
	// configured for the name.
	ErrHijacked = errors.New("lastmile: DNS answer outside expected ranges (hijacked)")
	// ErrMismatch: the answer does not answer the question asked.
	ErrMismatch = errors.New("lastmile: DNS answer does not match the question")
	// ErrNoRoute: every step of the route chain failed.
	ErrNoRoute = errors.New("lastmile: no route to host")
	// ErrNoResolver: the resolver chain has no usable step for a name.
	ErrNoResolver = errors.New("lastmile: no resolver step configured")
)

// maxCNAMEHops bounds the CNAME chain followed inside one answer.
const maxCNAMEHops = 8

// parseAnswer extracts the addresses of name (a fully qualified name) from a
// DNS response, following CNAMEs inside the answer section, and returns them
// with the smallest TTL on the path. The error wraps an outcome.Kind.
func parseAnswer(name string, m *dns.Msg) ([]netip.Addr, uint32, error) {
	if m == nil {
		return nil, 0, outcome.Wrap(outcome.DNSServerFailure, ErrMismatch)
	}
	if len(m.Question) == 1 && !equalName(m.Question[0].Name, name) {
		return nil, 0, outcome.Wrap(outcome.DNSServerFailure, fmt.Errorf("%w: asked %q, answer for %q", ErrMismatch, name, m.Question[0].Name))
	}
	switch m.Rcode {
	case dns.RcodeSuccess:
	case dns.RcodeNameError:
		return nil, 0, outcome.Wrap(outcome.DNSNotFound, ErrNXDomain)
	default:
		return nil, 0, outcome.Wrap(outcome.DNSServerFailure, fmt.Errorf("%w: %s", ErrRcode, rcodeName(m.Rcode)))
	}
	if m.Truncated {
		return nil, 0, outcome.Wrap(outcome.DNSServerFailure, ErrTruncated)
	}
	target := name
	minTTL := ^uint32(0)
	var addrs []netip.Addr
	for hop := 0; hop <= maxCNAMEHops; hop++ {
		var next string
		for _, rr := range m.Answer {
			h := rr.Header()
			if h == nil || !equalName(h.Name, target) || h.Class != dns.ClassINET {
				continue
			}
			switch r := rr.(type) {
			case *dns.A:
				if a, ok := netip.AddrFromSlice(r.A.To4()); ok && schedule.UsableAddr(a) {
					addrs = append(addrs, a)
					minTTL = min(minTTL, h.Ttl)
				}
			case *dns.AAAA:
				if a, ok := netip.AddrFromSlice(r.AAAA.To16()); ok && schedule.UsableAddr(a.Unmap()) && len(r.AAAA) == 16 {
					addrs = append(addrs, a)
					minTTL = min(minTTL, h.Ttl)
				}
			case *dns.CNAME:
				if next == "" {
					next = r.Target
					minTTL = min(minTTL, h.Ttl)
				}
			}
		}
		if len(addrs) > 0 || next == "" {
			break
		}
		target = next
	}
	if len(addrs) == 0 {
		return nil, 0, outcome.Wrap(outcome.DNSNotFound, ErrNoAddress)
	}
	slices.SortStableFunc(addrs, v4First)
	return slices.Compact(addrs), minTTL, nil
}

func equalName(a, b string) bool {
	return dns.CanonicalName(a) == dns.CanonicalName(b)
}

func rcodeName(rc int) string {
	if s, ok := dns.RcodeToString[rc]; ok {
		return s
	}
	return fmt.Sprintf("RCODE%d", rc)
}

// v4First orders IPv4 before IPv6: most access networks still route it best.
func v4First(a, b netip.Addr) int {
	switch {
	case a.Is4() && !b.Is4():
		return -1
	case !a.Is4() && b.Is4():
		return 1
	}
	return 0
}
