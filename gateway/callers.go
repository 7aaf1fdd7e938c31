package gateway

import (
	"cmp"
	"encoding/json"
	"maps"
	"math"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/veerhq/veer/tier"
)

// The callers log: per route (the shed endpoint) and Rpc-Caller, how many
// requests reached shed admission over the last hour. It is what the
// console pre-fills the criticality table with (QALM's "GUI pre-filled
// from tracing data"); caller names are never metric labels, so they are
// kept here, bounded, and served as JSON on GET /admin/callers.
//
// Bounds: 60 one-minute buckets per caller; at most CallersPerEndpoint
// callers per endpoint (a caller first seen when the endpoint is full is
// counted under OtherCallers, after callers silent for an hour have been
// dropped); at most 256 endpoints (route names, which the config bounds;
// a reload that renames routes leaves the old names until they are silent
// for an hour; past 256, requests are not counted); caller names at most tier.MaxCallerLen
// bytes (tier.CallerFromHeader drops longer ones, as shed admission does).
const (
	// CallersWindow is how far back /admin/callers counts.
	CallersWindow = time.Hour
	// CallersPerEndpoint bounds the callers kept per endpoint.
	CallersPerEndpoint = 100
	// OtherCallers names the count of callers past CallersPerEndpoint.
	OtherCallers = "other"

	callersBuckets      = 60
	callersBucket       = CallersWindow / callersBuckets
	callersMaxEndpoints = 256
)

// CallersReport is what GET /admin/callers returns.
type CallersReport struct {
	Endpoints []EndpointCallers `json:"endpoints"`
}

// EndpointCallers is one endpoint of a CallersReport: its callers by
// count, highest first (OtherCallers last).
type EndpointCallers struct {
	Endpoint string        `json:"endpoint"`
	Callers  []CallerCount `json:"callers"`
}

// CallerCount is one caller of an endpoint: requests over the last
// CallersWindow and the tier the shed table in force resolves for it (""
// when shedding is off, and for OtherCallers).
type CallerCount struct {
	Caller string `json:"caller"`
	Count  uint64 `json:"count"`
	Tier   string `json:"tier,omitempty"`
}

// series counts one caller in one-minute buckets: minute[i] is the minute
// (Unix time / callersBucket, which fits 32 bits until the year 10000)
// bucket i counts. 480 bytes a caller: at most 256 endpoints × 100
// callers, 12 MB.
type series struct {
	minute [callersBuckets]uint32
	n      [callersBuckets]uint32
}

// bucketOf is now's minute; a time before 1970 counts in minute 60 (a
// bucket index is never negative).
func bucketOf(now time.Time) int64 { return max(now.UnixNano()/int64(callersBucket), callersBuckets) }

func (s *series) add(m int64) {
	i := m % callersBuckets
	if s.minute[i] != uint32(m) {
		s.minute[i], s.n[i] = uint32(m), 0
	}
	if s.n[i] < math.MaxUint32 {
		s.n[i]++
	}
}

// count sums the buckets of the window ending in minute m: m-59 … m.
func (s *series) count(m int64) uint64 {
	var n uint64
	for i, b := range s.minute {
		if int64(b) > m-callersBuckets && int64(b) <= m {
			n += uint64(s.n[i])
		}
	}
	return n
}

type endpointLog struct {
	mu      sync.Mutex
	callers map[string]*series
	other   series
	pruned  int64 // the minute of the last prune
}

// callerLog is the gateway's callers log; its zero value is ready.
type callerLog struct {
	mu  sync.RWMutex
	eps map[string]*endpointLog
}

// observe counts one request of caller to endpoint at now. An empty
// caller (none stated, or too long) is not counted.
func (l *callerLog) observe(now time.Time, endpoint, caller string) {
	if caller == "" {
		return
	}
	l.mu.RLock()
	e := l.eps[endpoint]
	l.mu.RUnlock()
	if e == nil {
		if e = l.endpoint(endpoint); e == nil {
			return
		}
	}
	m := bucketOf(now)
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.callers[caller]
	if s == nil {
		if len(e.callers) >= CallersPerEndpoint && e.pruned != m {
			e.pruned = m
			for c, s := range e.callers {
				if s.count(m) == 0 {
					delete(e.callers, c)
				}
			}
		}
		if len(e.callers) >= CallersPerEndpoint {
			e.other.add(m)
			return
		}
		s = &series{}
		e.callers[caller] = s
	}
	s.add(m)
}

func (l *callerLog) endpoint(name string) *endpointLog {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.eps[name]; e != nil {
		return e
	}
	if len(l.eps) >= callersMaxEndpoints {
		return nil
	}
	if l.eps == nil {
		l.eps = map[string]*endpointLog{}
	}
	e := &endpointLog{callers: map[string]*series{}}
	l.eps[name] = e
	return e
}

// report returns the counts of the window ending at now, endpoints by
// name, callers by count; resolve (nil: no tiers) names each caller's tier.
// Endpoints and callers with nothing in the window are left out, and
// endpoints silent for the window are dropped.
func (l *callerLog) report(now time.Time, resolve func(endpoint, caller string) string) CallersReport {
	m := bucketOf(now)
	r := CallersReport{Endpoints: []EndpointCallers{}}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(l.eps)) {
		e := l.eps[name]
		ec := EndpointCallers{Endpoint: name}
		e.mu.Lock()
		for c, s := range e.callers {
			if n := s.count(m); n > 0 {
				cc := CallerCount{Caller: c, Count: n}
				if resolve != nil {
					cc.Tier = resolve(name, c)
				}
				ec.Callers = append(ec.Callers, cc)
			}
		}
		other := e.other.count(m)
		e.mu.Unlock()
		if len(ec.Callers) == 0 && other == 0 {
			delete(l.eps, name)
			continue
		}
		slices.SortFunc(ec.Callers, func(a, b CallerCount) int {
			return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Caller, b.Caller))
		})
		if other > 0 {
			ec.Callers = append(ec.Callers, CallerCount{Caller: OtherCallers, Count: other})
		}
		r.Endpoints = append(r.Endpoints, ec)
	}
	return r
}

// Callers reports, per route, the callers (Rpc-Caller) whose requests
// reached shed admission over the last CallersWindow, with their counts
// and the tier the shed table in force gives them.
func (g *Gateway) Callers() CallersReport {
	var resolve func(string, string) string
	if g.shedder != nil {
		resolve = func(endpoint, caller string) string {
			return g.shedder.Resolve(endpoint, caller, tier.Unset).String()
		}
	}
	return g.callers.report(time.Now(), resolve)
}

func (g *Gateway) serveCallers(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(g.Callers())
}
