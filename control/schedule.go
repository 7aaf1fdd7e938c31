package control

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"slices"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/lastmile"
	"github.com/veerhq/veer/store"
)

// Scheduling defaults.
const (
	// DefaultScheduleTTL is the schedule answers' ttl_seconds when the
	// Access document says none.
	DefaultScheduleTTL = 300
	maxScheduleNodes   = 32
)

// Access is the scheduling API's document (KeyAccess): access nodes by
// region (regions and their CIDRs come from the routing Table).
type Access struct {
	// TTLSeconds of the answers; default DefaultScheduleTTL.
	TTLSeconds int `json:"ttl_seconds,omitempty" yaml:"ttl_seconds,omitempty"`
	// Regions maps a region name to its nodes.
	Regions map[string][]Node `json:"regions,omitempty" yaml:"regions,omitempty"`
	// Default nodes serve clients in no region, or in a region without
	// healthy nodes.
	Default []Node `json:"default,omitempty" yaml:"default,omitempty"`
}

// Node is one access node.
type Node struct {
	// Addr is ip:port.
	Addr string `json:"addr" yaml:"addr"`
	// ServerName is its TLS name; empty: the requested domain.
	ServerName string `json:"server_name,omitempty" yaml:"server_name,omitempty"`
	// Protocols it serves (h3, h2, http/1.1); empty: all.
	Protocols []string `json:"protocols,omitempty" yaml:"protocols,omitempty"`
	// Weight orders the nodes, highest first; default 1.
	Weight int `json:"weight,omitempty" yaml:"weight,omitempty"`
	// Down takes the node out of the answers (health).
	Down bool `json:"down,omitempty" yaml:"down,omitempty"`
	// Domains it serves; empty: every domain.
	Domains []string `json:"domains,omitempty" yaml:"domains,omitempty"`
}

// Validate names the bad field.
func (a *Access) Validate() error {
	if a.TTLSeconds < 0 || a.TTLSeconds > 86400 {
		return config.Field("ttl_seconds", "%d out of 0..86400", a.TTLSeconds)
	}
	check := func(f string, ns []Node) error {
		for i, n := range ns {
			ap, err := netip.ParseAddrPort(n.Addr)
			if err != nil || ap.Port() == 0 {
				return config.Field(fmt.Sprintf("%s[%d].addr", f, i), "%q: want ip:port", n.Addr)
			}
			for _, p := range n.Protocols {
				if p != "h3" && p != "h2" && p != "http/1.1" {
					return config.Field(fmt.Sprintf("%s[%d].protocols", f, i), "%q: want h3, h2 or http/1.1", p)
				}
			}
			if n.Weight < 0 {
				return config.Field(fmt.Sprintf("%s[%d].weight", f, i), "negative")
			}
		}
		return nil
	}
	if err := check("default", a.Default); err != nil {
		return err
	}
	for r, ns := range a.Regions {
		if err := check("regions."+r, ns); err != nil {
			return err
		}
	}
	return nil
}

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
func (as *accessSnap) nodes(region, domain string) []lastmile.AccessNode {
	var out []lastmile.AccessNode
	add := func(ns []Node) {
		for _, n := range ns {
			if len(out) == maxScheduleNodes {
				return
			}
			if len(n.Domains) > 0 && !slices.Contains(n.Domains, domain) {
				continue
			}
			out = append(out, lastmile.AccessNode{Addr: n.Addr, ServerName: n.ServerName, Protocols: n.Protocols})
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
	json.NewEncoder(w).Encode(lastmile.ScheduleResponse{Version: lastmile.ScheduleVersion, TTLSeconds: as.ttl, Nodes: nodes})
}

// ParseScheduleRequest decodes and validates a scheduling API request
// body; unknown fields are ignored (additions within version 1).
func ParseScheduleRequest(body []byte) (lastmile.ScheduleRequest, error) {
	var req lastmile.ScheduleRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return req, fmt.Errorf("bad JSON: %v", err)
	}
	if req.Version != lastmile.ScheduleVersion {
		return req, fmt.Errorf("version %d: this service speaks version %d", req.Version, lastmile.ScheduleVersion)
	}
	if req.Domain == "" || !validDomain(req.Domain) {
		return req, fmt.Errorf("domain %q: want a domain", req.Domain)
	}
	return req, nil
}
