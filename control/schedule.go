package control

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/routing"
	"github.com/veerhq/veer/routing/schedule"
	"github.com/veerhq/veer/store"
	"github.com/veerhq/veer/store/docs"
)

// Scheduling defaults.
const (
	// DefaultScheduleTTL is the schedule answers' ttl_seconds when the
	// Access document says none.
	DefaultScheduleTTL = 300
	maxScheduleNodes   = schedule.MaxNodes
)

// Access is the scheduling API's document (KeyAccess), whose schema is
// store/docs': access nodes by region (regions and their CIDRs come from the
// routing Table).
type Access = docs.Access

// Node is one access node of the Access document (docs.AccessNode: the
// wire node clients are told, plus weight, health and domains).
type Node = docs.AccessNode

// accessSnap is the compiled Access document: healthy nodes by region,
// in weight order.
type accessSnap struct {
	ttl     int
	regions map[string][]Node
	def     []Node
}

func (s *Service) applyAccess(sn *store.Snapshot) error {
	d, ok := sn.Docs[KeyAccess]
	if !ok {
		s.access.Store(nil)
		return nil
	}
	var a Access
	if err := config.Parse(d.Value, KeyAccess, &a); err != nil {
		return err
	}
	order := func(ns []Node) []Node {
		var out []Node
		for _, n := range ns {
			if !n.Down {
				out = append(out, n)
			}
		}
		slices.SortStableFunc(out, func(x, y Node) int { return cmp.Compare(cmp.Or(y.Weight, 1), cmp.Or(x.Weight, 1)) })
		return out
	}
	as := &accessSnap{ttl: cmp.Or(a.TTLSeconds, DefaultScheduleTTL), regions: map[string][]Node{}, def: order(a.Default)}
	for r, ns := range a.Regions {
		as.regions[r] = order(ns)
	}
	s.access.Store(as)
	return nil
}

// nodes returns the schedule for a client in region for domain.
func (as *accessSnap) nodes(region, domain string) []schedule.Node {
	var out []schedule.Node
	add := func(ns []Node) {
		for _, n := range ns {
			if len(out) == maxScheduleNodes {
				return
			}
			if len(n.Domains) > 0 && !slices.Contains(n.Domains, domain) {
				continue
			}
			out = append(out, n.Node)
		}
	}
	add(as.regions[region])
	if len(out) == 0 {
		add(as.def)
	}
	return out
}

// serveSchedule is the scheduling API v1 (docs/lastmile.md).
func (s *Service) serveSchedule(w http.ResponseWriter, r *http.Request) {
	body, ok := readPost(w, r)
	if !ok {
		return
	}
	req, err := ParseScheduleRequest(body)
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	as := s.access.Load()
	if as == nil {
		httpError(w, http.StatusServiceUnavailable, "no access nodes configured ("+KeyAccess+")")
		return
	}
	region := ""
	if snap := s.snap.Load(); snap != nil {
		region = snap.Region(clientAddr(r, s.trusted))
	}
	nodes := as.nodes(region, req.Domain)
	if len(nodes) == 0 {
		httpError(w, http.StatusServiceUnavailable, "no healthy access node for this region and domain")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(schedule.Response{Version: schedule.Version, TTLSeconds: as.ttl, Nodes: nodes})
}

// ParseScheduleRequest decodes and validates a scheduling API request
// body; unknown fields are ignored (additions within version 1).
func ParseScheduleRequest(body []byte) (schedule.Request, error) {
	var req schedule.Request
	if err := json.Unmarshal(body, &req); err != nil {
		return req, fmt.Errorf("bad JSON: %v", err)
	}
	if req.Version != schedule.Version {
		return req, fmt.Errorf("version %d: this service speaks version %d", req.Version, schedule.Version)
	}
	if req.Domain == "" || !routing.ValidDomain(req.Domain) {
		return req, fmt.Errorf("domain %q: want a domain", req.Domain)
	}
	return req, nil
}
