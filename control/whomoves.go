package control

import (
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Dry-run sample bounds.
const (
	defaultSample = 10000
	maxSample     = 200000
	recentSize    = 4096
	recentEvery   = 64
)

// Probe is one (address, device, customer) a dry run decides for.
type Probe struct {
	Addr       netip.Addr
	DeviceID   string
	CustomerID string
}

// MoveReport is a dry run's answer: who would change domain.
type MoveReport struct {
	Sample int     `json:"sample"`
	Source string  `json:"source"`
	Moved  int     `json:"moved"`
	Share  float64 `json:"share_percent"`
	// Moves counts "old primary -> new primary" pairs.
	Moves map[string]int `json:"moves"`
	// Examples are up to 10 moved device IDs.
	Examples []string `json:"examples,omitempty"`
}

// WhoMoves compares the primary domain of each probe under two snapshots.
func WhoMoves(before, after *Snapshot, probes []Probe) MoveReport {
	rep := MoveReport{Sample: len(probes), Moves: map[string]int{}}
	for _, p := range probes {
		a, b := before.decide(p.Addr, p.DeviceID, p.CustomerID), after.decide(p.Addr, p.DeviceID, p.CustomerID)
		if a.Primary == b.Primary {
			continue
		}
		rep.Moved++
		rep.Moves[a.Primary+" -> "+b.Primary]++
		if len(rep.Examples) < 10 {
			rep.Examples = append(rep.Examples, p.DeviceID)
		}
	}
	if len(probes) > 0 {
		rep.Share = 100 * float64(rep.Moved) / float64(len(probes))
	}
	sort.Strings(rep.Examples)
	return rep
}

// SyntheticProbes returns n probes with IDs "sample-<i>", spread evenly
// over the table's regions (one address inside each) and no region.
func SyntheticProbes(t *Table, n int) []Probe {
	addrs := []netip.Addr{netip.IPv6Unspecified()}
	for _, r := range t.Regions {
		if len(r.CIDRs) > 0 {
			if p, err := netip.ParsePrefix(r.CIDRs[0]); err == nil {
				addrs = append(addrs, p.Masked().Addr())
			}
		}
	}
	out := make([]Probe, n)
	for i := range out {
		out[i] = Probe{Addr: addrs[i%len(addrs)], DeviceID: "sample-" + strconv.Itoa(i)}
	}
	return out
}

// recent keeps a sample (one request in recentEvery) of recently seen
// requests for dry runs; in memory only, bounded.
type recent struct {
	n    atomic.Uint64
	mu   sync.Mutex
	ring []Probe
	next int
}

func (rc *recent) add(p Probe) {
	if rc.n.Add(1)%recentEvery != 1 {
		return
	}
	rc.mu.Lock()
	if len(rc.ring) < recentSize {
		rc.ring = append(rc.ring, p)
	} else {
		rc.ring[rc.next] = p
		rc.next = (rc.next + 1) % recentSize
	}
	rc.mu.Unlock()
}

func (rc *recent) list() []Probe {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]Probe(nil), rc.ring...)
}

// table returns the routing table in the latest store snapshot.
func (s *Service) table() *Table { return s.current().table }

// current parses the routing documents of the latest store snapshot.
func (s *Service) current() routingInputs {
	sn := s.docs.Load()
	if sn == nil {
		return routingInputs{state: new(State), emergency: new(Emergency)}
	}
	in, err := parseRouting(sn, &s.parsed)
	if err != nil {
		return routingInputs{state: new(State), emergency: new(Emergency)}
	}
	return in
}

// dryRun answers PUT ?dry_run=true: for routing documents, who would move
// (?sample=N synthetic IDs, or ?sample=recent for recently seen devices);
// for others, that the document validates.
func (s *Service) dryRun(w http.ResponseWriter, r *http.Request, key string, doc any) {
	cur := s.current()
	next := cur
	switch d := doc.(type) {
	case *Table:
		next.table = d
	case *State:
		next.state = d
	case *Emergency:
		next.emergency = d
	case *Whitelist:
		next.lists = maps.Clone(cur.lists)
		next.lists[strings.TrimPrefix(key, KeyWhitelists)] = d
	default:
		writeJSON(w, http.StatusOK, map[string]any{"valid": true, "key": key})
		return
	}
	if next.table == nil {
		httpError(w, http.StatusConflict, "no routing table yet: nothing to compare with")
		return
	}
	if cur.table == nil {
		cur.table = next.table
	}
	var probes []Probe
	source := "synthetic"
	switch q := r.URL.Query().Get("sample"); q {
	case "recent":
		probes, source = s.recent.list(), "recent"
	default:
		n := defaultSample
		if q != "" {
			v, err := strconv.Atoi(q)
			if err != nil || v < 1 || v > maxSample {
				httpError(w, http.StatusBadRequest, fmt.Sprintf("sample: want recent or 1..%d", maxSample))
				return
			}
			n = v
		}
		probes = SyntheticProbes(next.table, n)
	}
	rep := WhoMoves(CompileLists(cur.table, cur.state, cur.emergency, cur.lists, 0, s.key),
		CompileLists(next.table, next.state, next.emergency, next.lists, 0, s.key), probes)
	rep.Source = source
	writeJSON(w, http.StatusOK, rep)
}
