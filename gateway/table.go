package gateway

import (
	"cmp"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/veerhq/veer/retry"
)

// table is one compiled config snapshot: what the request path reads,
// through an atomic pointer, without locks. It is never modified after
// compile; Apply builds a new one.
type table struct {
	cfg      *Config
	exact    map[string][]*route
	wildcard []wildcardRoutes // longest suffix first
	any      []*route
	routes   []*route
	clusters map[string]*cluster
	trusted  []netip.Prefix
	keys     []keySource
	retrier  *retry.Retrier
}

type wildcardRoutes struct {
	suffix string // ".example.com"
	routes []*route
}

// route is a compiled Route.
type route struct {
	cfg      Route
	prefix   string
	clusters []*cluster
	weights  []int
	weighted bool
	cache    *answerCache
	lat      *latencyTracker // kept across reloads by route name
	m        *routeMetrics
}

// keySource says where a limit dimension's key comes from.
type keySource struct {
	kind   uint8 // keyRoute, keyClientIP, keyHost, keyHeader
	header string
}

const (
	keyRoute uint8 = iota
	keyClientIP
	keyHost
	keyHeader
)

// buildRoutes indexes routes for match. Within one host bucket, longer
// prefixes come first; among equal prefixes, file order.
func (t *table) buildRoutes(routes []*route) {
	t.exact = map[string][]*route{}
	byWild := map[string][]*route{}
	for _, r := range routes {
		switch h := r.cfg.Host; {
		case h == "":
			t.any = append(t.any, r)
		case strings.HasPrefix(h, "*."):
			byWild[h[1:]] = append(byWild[h[1:]], r)
		default:
			t.exact[h] = append(t.exact[h], r)
		}
	}
	longest := func(a, b *route) int { return len(b.prefix) - len(a.prefix) }
	for h := range t.exact {
		slices.SortStableFunc(t.exact[h], longest)
	}
	slices.SortStableFunc(t.any, longest)
	for s, rs := range byWild {
		slices.SortStableFunc(rs, longest)
		t.wildcard = append(t.wildcard, wildcardRoutes{suffix: s, routes: rs})
	}
	slices.SortFunc(t.wildcard, func(a, b wildcardRoutes) int {
		return cmp.Or(len(b.suffix)-len(a.suffix), strings.Compare(a.suffix, b.suffix))
	})
	t.routes = routes
}

// match returns the route for a request's Host header and path, or nil.
// The host is compared without port and case; exact hosts win over
// wildcards (longest suffix first), which win over host-less routes.
func (t *table) match(host, path string) *route {
	host = normalizeHost(host)
	if r := matchPrefix(t.exact[host], path); r != nil {
		return r
	}
	for _, w := range t.wildcard {
		if len(host) > len(w.suffix) && strings.HasSuffix(host, w.suffix) {
			if r := matchPrefix(w.routes, path); r != nil {
				return r
			}
		}
	}
	return matchPrefix(t.any, path)
}

func matchPrefix(rs []*route, path string) *route {
	for _, r := range rs {
		if prefixMatch(r.prefix, path) {
			return r
		}
	}
	return nil
}

// prefixMatch matches whole path segments: "/api" matches "/api" and
// "/api/x" but not "/apix"; a prefix ending in "/" matches as a string.
func prefixMatch(prefix, path string) bool {
	if !strings.HasPrefix(path, prefix) {
		return false
	}
	return len(path) == len(prefix) || strings.HasSuffix(prefix, "/") || path[len(prefix)] == '/'
}

func normalizeHost(h string) string {
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i:], "]") {
		h = h[:i]
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	h = strings.TrimSuffix(h, ".")
	for i := 0; i < len(h); i++ {
		if c := h[i]; c >= 'A' && c <= 'Z' {
			return strings.ToLower(h)
		}
	}
	return h
}

// trustedAddr reports whether remote (host:port) is in a trusted network.
func (t *table) trustedAddr(remote string) bool {
	if len(t.trusted) == 0 {
		return false
	}
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	a = a.Unmap()
	for _, p := range t.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func parseKeys(ks []string) []keySource {
	out := make([]keySource, len(ks))
	for i, k := range ks {
		switch {
		case k == "route":
			out[i] = keySource{kind: keyRoute}
		case k == "client_ip":
			out[i] = keySource{kind: keyClientIP}
		case k == "host":
			out[i] = keySource{kind: keyHost}
		default:
			out[i] = keySource{kind: keyHeader, header: strings.TrimPrefix(k, "header:")}
		}
	}
	return out
}
