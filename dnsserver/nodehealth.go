package dnsserver

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"
)

// NodeHealthPath is where HealthHandler is mounted by `veer dns` (on its
// metrics listener), and where the control plane's console reads it.
const NodeHealthPath = "/access/health"

// NodeHealth is one access node of one access domain as the server's
// health checks see it now.
type NodeHealth struct {
	// Domain is the access domain's name, without the final dot.
	Domain string `json:"domain"`
	Addr   string `json:"addr"`
	Region string `json:"region,omitempty"`
	// Check is the node's health check ("" when it has none: always in
	// the answers, never probed).
	Check string `json:"check,omitempty"`
	// Probed: the check has run at least once; Up, Since, Checked and
	// Error are its word (a node with a check that has not run yet is up).
	Probed bool `json:"probed"`
	Up     bool `json:"up"`
	// Since is when the check's result last changed (or its first probe).
	Since time.Time `json:"since,omitzero"`
	// Checked is its last probe.
	Checked time.Time `json:"checked,omitzero"`
	// Error is why the last probe failed.
	Error string `json:"error,omitempty"`
}

// HealthReport is HealthHandler's answer.
type HealthReport struct {
	// Interval is how often the checks run.
	Interval time.Duration `json:"interval_ns"`
	Nodes    []NodeHealth  `json:"nodes"`
}

// NodeHealth lists every access node of the served zones (zones by
// origin, domains by name, nodes in their order) with its health as the
// last round of checks saw it. It takes no lock on the query path.
func (s *Server) NodeHealth() []NodeHealth {
	st := s.state.Load()
	out := []NodeHealth{}
	origins := make([]string, 0, len(st.snap.zones))
	for o := range st.snap.zones {
		origins = append(origins, o)
	}
	slices.Sort(origins)
	for _, o := range origins {
		z := st.snap.zones[o]
		names := make([]string, 0, len(z.names))
		for n, own := range z.names {
			if own.access != nil {
				names = append(names, n)
			}
		}
		slices.Sort(names)
		for _, n := range names {
			for _, nd := range z.names[n].access.nodes {
				h := NodeHealth{Domain: strings.TrimSuffix(n, "."), Addr: nd.addr.String(), Region: nd.region, Check: nd.check, Up: true}
				if ps, ok := s.health.state(nd.check); ok && nd.check != "" {
					h.Probed, h.Up, h.Since, h.Checked, h.Error = true, ps.up, ps.since.UTC(), ps.checked.UTC(), ps.err
				}
				out = append(out, h)
			}
		}
	}
	return out
}

// HealthHandler serves GET NodeHealthPath: the HealthReport as JSON. It
// names addresses and check URLs, like the config file: serve it where
// /metrics is served (an admin or management listener), not to clients.
func (s *Server) HealthHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		rep := HealthReport{Interval: s.state.Load().cfg.Health.Interval, Nodes: s.NodeHealth()}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(rep)
	})
}
