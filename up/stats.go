package up

import (
	"maps"
	"sort"
	"sync"
	"time"
)

// Counts are the results of app requests: OK (2xx), Shed (the gateway shed
// or limited it: 503 overloaded, 429), Fail (everything else: a network
// error, a timeout, another status).
type Counts struct {
	OK   int64 `json:"ok"`
	Shed int64 `json:"shed"`
	Fail int64 `json:"fail"`
}

// Total is all requests counted.
func (c Counts) Total() int64 { return c.OK + c.Shed + c.Fail }

// Success is OK / (OK + Fail): shed requests are the gateway protecting
// the critical ones, counted apart. 1 with no requests.
func (c Counts) Success() float64 {
	if c.OK+c.Fail == 0 {
		return 1
	}
	return float64(c.OK) / float64(c.OK+c.Fail)
}

// Sub is c minus an earlier reading.
func (c Counts) Sub(o Counts) Counts { return Counts{c.OK - o.OK, c.Shed - o.Shed, c.Fail - o.Fail} }

func (c *Counts) add(r result) {
	switch r {
	case resultOK:
		c.OK++
	case resultShed:
		c.Shed++
	default:
		c.Fail++
	}
}

type result uint8

const (
	resultOK result = iota
	resultShed
	resultFail
)

// Stats is what `veer up` counts of its population; Snapshot is its
// reading, served at /v1/stats.
type Stats struct {
	mu       sync.Mutex
	all      Counts
	groups   map[string]*Counts // by the device's routing site
	domains  map[string]*Counts // by the domain the request went to
	clusters map[string]int64   // OK answers by backend cluster
	tiers    map[string]*Counts
	reasons  map[string]int64 // shed and failed requests by "status outcome" or error kind
}

func newStats() *Stats {
	return &Stats{groups: map[string]*Counts{}, domains: map[string]*Counts{}, clusters: map[string]int64{}, tiers: map[string]*Counts{}, reasons: map[string]int64{}}
}

func bump(m map[string]*Counts, k string, r result) {
	c := m[k]
	if c == nil {
		c = &Counts{}
		m[k] = c
	}
	c.add(r)
}

func (s *Stats) record(group, domain, cluster, tier, reason string, r result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.all.add(r)
	if r != resultOK {
		s.reasons[reason]++
	}
	bump(s.groups, group, r)
	bump(s.domains, domain, r)
	bump(s.tiers, tier, r)
	if r == resultOK && cluster != "" {
		s.clusters[cluster]++
	}
}

// Snapshot is one reading of the population.
type Snapshot struct {
	Time     time.Time         `json:"time"`
	All      Counts            `json:"all"`
	Groups   map[string]Counts `json:"groups"`
	Domains  map[string]Counts `json:"domains"`
	Clusters map[string]int64  `json:"clusters"`
	Tiers    map[string]Counts `json:"tiers"`
	// Reasons counts shed and failed requests by "status kind" (e.g.
	// "503 overloaded") or, without a response, the error's kind.
	Reasons map[string]int64 `json:"reasons"`
	// States counts devices by failover state, per group ("a/PRIMARY").
	States map[string]int `json:"states"`
	// Devices is how many devices run (bootstrapped).
	Devices int `json:"devices"`
	// Started is when the population started sending.
	Started time.Time `json:"started"`
	// RequestTimeout bounds one app request: a request in flight when a
	// fault is detected ends within it.
	RequestTimeout time.Duration `json:"request_timeout"`
	// FeedCapacity is what site a answers on /api/feed, requests/s
	// (Config.FeedCapacity).
	FeedCapacity float64 `json:"feed_capacity"`
	// RecoveryBy is, per group, the latest time a device in BACKUP
	// announced for its next canary to the primary (failover's recovery
	// timer): a return before then is not due.
	RecoveryBy map[string]time.Time `json:"recovery_by,omitempty"`
}

func flat(m map[string]*Counts) map[string]Counts {
	out := make(map[string]Counts, len(m))
	for k, v := range m {
		out[k] = *v
	}
	return out
}

func (s *Stats) snapshot() Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Snapshot{Time: time.Now(), All: s.all, Groups: flat(s.groups), Domains: flat(s.domains),
		Clusters: maps.Clone(s.clusters), Tiers: flat(s.tiers), Reasons: maps.Clone(s.reasons)}
}

// InState is how many devices of group are in state (e.g. "a", "BACKUP").
func (s Snapshot) InState(group, state string) int { return s.States[group+"/"+state] }

// GroupSize is how many devices group has.
func (s Snapshot) GroupSize(group string) int {
	n := 0
	for k, v := range s.States {
		if len(k) > len(group) && k[:len(group)+1] == group+"/" {
			n += v
		}
	}
	return n
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
