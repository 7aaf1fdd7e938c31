package lastmile

import (
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// altSvcMemory remembers which nodes advertised HTTP/3 in an Alt-Svc header
// (RFC 7838) on the same port, until the advertisement's max-age. The race
// tries QUIC only to such nodes, to scheduler nodes that list h3, or to any
// node with RaceConfig.AssumeH3: an origin that never advertised h3 (Debian's
// nginx and HAProxy) costs no QUIC attempt. It is persisted with the DNS
// cache so that the next launch knows too.
type altSvcMemory struct {
	mu       sync.Mutex
	m        map[string]time.Time // node addr -> advertisement expiry
	onChange func()
}

// defaultAltSvcMaxAge is RFC 7838's default ma (24 hours).
const defaultAltSvcMaxAge = 24 * time.Hour

// maxAltSvcMaxAge caps an advertised ma: a week.
const maxAltSvcMaxAge = 7 * 24 * time.Hour

func newAltSvcMemory() *altSvcMemory { return &altSvcMemory{m: map[string]time.Time{}} }

// advertised reports whether addr advertised h3 and the advertisement holds.
func (a *altSvcMemory) advertised(addr string, now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	until, ok := a.m[addr]
	return ok && now.Before(until)
}

// learn applies the Alt-Svc header values of a response from addr.
func (a *altSvcMemory) learn(addr string, values []string, now time.Time) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return
	}
	ma, clear, ok := parseAltSvcH3(values, port)
	a.mu.Lock()
	old, had := a.m[addr]
	switch {
	case clear:
		delete(a.m, addr)
	case ok:
		a.m[addr] = now.Add(ma)
	}
	changed := clear && had || ok && (!had || a.m[addr].Sub(old) > time.Hour)
	a.mu.Unlock()
	if changed && a.onChange != nil {
		a.onChange()
	}
}

// parseAltSvcH3 finds an h3 alternative on port in Alt-Svc header values:
// `h3=":443"; ma=3600, h2=":443"`, or `clear`. It returns the max-age
// (default 24 h, capped at a week), whether the header clears every
// alternative, and whether an h3 alternative on port was found. An
// alternative naming another host is not the node and is ignored.
func parseAltSvcH3(values []string, port string) (time.Duration, bool, bool) {
	for _, v := range values {
		for _, alt := range strings.Split(v, ",") {
			params := strings.Split(alt, ";")
			head := strings.TrimSpace(params[0])
			if head == "clear" {
				return 0, true, false
			}
			proto, authority, found := strings.Cut(head, "=")
			if !found || strings.TrimSpace(proto) != "h3" {
				continue
			}
			authority = strings.Trim(strings.TrimSpace(authority), `"`)
			host, p, err := net.SplitHostPort(authority)
			if err != nil || host != "" || p != port {
				continue
			}
			ma := defaultAltSvcMaxAge
			for _, param := range params[1:] {
				k, val, _ := strings.Cut(strings.TrimSpace(param), "=")
				if strings.TrimSpace(k) == "ma" {
					if n, err := strconv.ParseInt(strings.Trim(strings.TrimSpace(val), `"`), 10, 64); err == nil && n >= 0 {
						ma = min(time.Duration(n)*time.Second, maxAltSvcMaxAge)
					}
				}
			}
			if ma <= 0 {
				continue
			}
			return ma, false, true
		}
	}
	return 0, false, false
}

// export returns the advertisements still valid at now.
func (a *altSvcMemory) export(now time.Time) []altSvcEntry {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]altSvcEntry, 0, len(a.m))
	for addr, until := range a.m {
		if now.Before(until) {
			out = append(out, altSvcEntry{Addr: addr, Until: until})
		}
	}
	return out
}

// restore loads persisted advertisements.
func (a *altSvcMemory) restore(es []altSvcEntry, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, e := range es {
		if now.Before(e.Until) {
			a.m[e.Addr] = e.Until
		}
	}
}
