package async

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// GroupStats is one group's line of the admin stats.
type GroupStats struct {
	Group string `json:"group"`
	// Depth: invocations waiting or running.
	Depth uint64 `json:"depth"`
	// OldestAge: how long the oldest has waited, seconds.
	OldestAge float64 `json:"oldest_age_seconds"`
	Paused    bool    `json:"paused"`
}

// Stats returns every group's depth and oldest age.
func (s *Service) Stats(ctx context.Context) ([]GroupStats, error) {
	out := make([]GroupStats, 0, len(s.cfg.Groups))
	now := s.clk.Now()
	for _, g := range s.cfg.Groups {
		n, oldest, err := s.eng.Depth(ctx, g.Name)
		if err != nil {
			return nil, err
		}
		st := GroupStats{Group: g.Name, Depth: n, Paused: s.paused(g.Name, "")}
		if !oldest.IsZero() {
			st.OldestAge = now.Sub(oldest).Seconds()
		}
		out = append(out, st)
	}
	return out, nil
}

// AdminHandler serves the queue's operations under /admin/async/ (the
// caller puts it behind the admin token):
//
//	POST /admin/async/pause?group=G | ?tenant=T    stop starting their invocations (every gateway on the store)
//	POST /admin/async/resume?group=G | ?tenant=T
//	POST /admin/async/replay?group=G[&max=N]        dead letters submitted again (default 100)
//	POST /admin/async/purge?group=G&tenant=T        queued invocations dropped (either may be empty, not both)
//	GET  /admin/async/stats                          depth and oldest age per group
//
// Every action is logged (audit: action, target, remote address, result).
func (s *Service) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	target := func(w http.ResponseWriter, r *http.Request) (group, tenant string, ok bool) {
		q := r.URL.Query()
		group, tenant = q.Get("group"), q.Get("tenant")
		if group != "" && s.scheds[group] == nil {
			http.Error(w, "async: no group "+strconv.Quote(group), http.StatusNotFound)
			return "", "", false
		}
		if group == "" && !q.Has("tenant") {
			http.Error(w, "async: name a group or a tenant", http.StatusBadRequest)
			return "", "", false
		}
		return group, tenant, true
	}
	audit := func(r *http.Request, action, group, tenant string, err error, extra ...any) {
		res := "ok"
		if err != nil {
			res = err.Error()
		}
		s.log.Info("async admin", append([]any{"audit", true, "action", action, "group", group, "tenant", tenant, "remote", r.RemoteAddr, "result", res}, extra...)...)
	}
	for action, pause := range map[string]bool{"pause": true, "resume": false} {
		mux.HandleFunc("POST /admin/async/"+action, func(w http.ResponseWriter, r *http.Request) {
			group, tenant, ok := target(w, r)
			if !ok {
				return
			}
			if group != "" && tenant != "" {
				http.Error(w, "async: pause a group or a tenant, not both", http.StatusBadRequest)
				return
			}
			err := s.setPaused(r.Context(), group, tenant, pause)
			audit(r, action, group, tenant, err)
			if err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			writeJSON(w, map[string]any{"action": action, "group": group, "tenant": tenant})
		})
	}
	mux.HandleFunc("POST /admin/async/replay", func(w http.ResponseWriter, r *http.Request) {
		group := r.URL.Query().Get("group")
		if s.scheds[group] == nil {
			http.Error(w, "async: no group "+strconv.Quote(group), http.StatusNotFound)
			return
		}
		limit := 100
		if m := r.URL.Query().Get("max"); m != "" {
			v, err := strconv.Atoi(m)
			if err != nil || v < 1 || v > 10000 {
				http.Error(w, "async: max must be in [1, 10000]", http.StatusBadRequest)
				return
			}
			limit = v
		}
		ids, err := s.eng.Replay(r.Context(), group, limit)
		audit(r, "replay", group, "", err, "replayed", len(ids))
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		if len(ids) > 0 {
			s.scheds[group].notify()
		}
		writeJSON(w, map[string]any{"replayed": ids})
	})
	mux.HandleFunc("POST /admin/async/purge", func(w http.ResponseWriter, r *http.Request) {
		group, tenant, ok := target(w, r)
		if !ok {
			return
		}
		err := s.eng.Purge(r.Context(), group, tenant)
		audit(r, "purge", group, tenant, err)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		writeJSON(w, map[string]any{"purged": true, "group": group, "tenant": tenant})
	})
	mux.HandleFunc("GET /admin/async/stats", func(w http.ResponseWriter, r *http.Request) {
		st, err := s.Stats(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		writeJSON(w, st)
	})
	return mux
}

// depthCollector reads the depth and oldest age of every group from the
// engine at each scrape (bounded by a 2 s timeout; on error the gauges are
// left out of that scrape).
type depthCollector struct {
	s      *Service
	depth  *prometheus.Desc
	oldest *prometheus.Desc
}

func newDepthCollector(s *Service) *depthCollector {
	return &depthCollector{s: s,
		depth:  prometheus.NewDesc("veer_async_depth_invocations", "Invocations waiting or running, by group.", []string{"group"}, nil),
		oldest: prometheus.NewDesc("veer_async_oldest_age_seconds", "How long the oldest waiting or running invocation has waited, by group.", []string{"group"}, nil),
	}
}

func (c *depthCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.depth; ch <- c.oldest }

func (c *depthCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := c.s.Stats(ctx)
	if err != nil {
		return
	}
	for _, g := range st {
		ch <- prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, float64(g.Depth), g.Group)
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, g.OldestAge, g.Group)
	}
}
