package gateway

import (
	"crypto/subtle"
	"encoding/json"
	"log"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/obs"
)

// State is what GET /admin/state returns.
type State struct {
	Ready    bool           `json:"ready"`
	Clusters []ClusterState `json:"clusters"`
}

// ClusterState is one cluster in State.
type ClusterState struct {
	Name     string         `json:"name"`
	Drained  bool           `json:"drained"`
	Share    float64        `json:"share"` // of its routes' traffic it takes now
	Breaker  string         `json:"breaker,omitempty"`
	Backends []BackendState `json:"backends"`
}

// BackendState is one backend in State.
type BackendState struct {
	Address      string    `json:"address"`
	Drained      bool      `json:"drained"`
	Down         bool      `json:"down"`
	EjectedUntil time.Time `json:"ejected_until,omitzero"`
	Outstanding  int64     `json:"outstanding"`
}

// State returns the live state of clusters and backends.
func (g *Gateway) State() State {
	t := g.snap.Load()
	now := time.Now()
	s := State{Ready: g.ready.Load()}
	for _, cc := range t.cfg.Clusters {
		c := t.clusters[cc.Name]
		cs := ClusterState{Name: cc.Name, Drained: c.state.drained.Load(), Share: c.share(now.UnixNano(), 0)}
		if c.breaker != nil {
			cs.Breaker = c.breaker.Status().State.String()
		}
		for _, b := range c.backends {
			bs := BackendState{Address: b.addr, Drained: b.drained.Load(), Down: b.down.Load(), Outstanding: b.outstanding.Load()}
			if u := b.ejectedUntil.Load(); u > now.UnixNano() {
				bs.EjectedUntil = time.Unix(0, u).UTC()
			}
			cs.Backends = append(cs.Backends, bs)
		}
		s.Clusters = append(s.Clusters, cs)
	}
	return s
}

// ErrUnknownTarget: Drain named a cluster or backend not in the config.
var ErrUnknownTarget = errNotFound("gateway: no such cluster or backend")

type errNotFound string

func (e errNotFound) Error() string { return string(e) }

// Drain stops sending new requests to a cluster (backend "") or to one of
// its backends; requests in flight finish. drain=false undoes it. Drain is
// state, not config: it survives reloads while the target stays.
func (g *Gateway) Drain(cluster, backend string, drain bool) error {
	t := g.snap.Load()
	c := t.clusters[cluster]
	if c == nil {
		return ErrUnknownTarget
	}
	if backend == "" {
		c.state.drained.Store(drain)
		g.log.Info("cluster drain", "cluster", cluster, "drained", drain)
		return nil
	}
	for _, b := range c.backends {
		if b.addr == backend {
			b.drained.Store(drain)
			g.publishBackends(c)
			g.log.Info("backend drain", "cluster", cluster, "backend", backend, "drained", drain)
			return nil
		}
	}
	return ErrUnknownTarget
}

// adminHandler serves /healthz, /readyz, /metrics and /admin/callers
// openly and the rest of /admin/
// behind the token.
func (g *Gateway) adminHandler(token string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !g.ready.Load() {
			http.Error(w, "draining", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	gath := g.opts.Gatherer
	if gath == nil {
		gath = prometheus.DefaultGatherer
	}
	mux.Handle("GET /metrics", obs.Handler(gath))
	// open like /metrics (aggregate counts, no request data): veer control
	// reads it for the console's criticality page without the admin token
	mux.HandleFunc("GET /admin/callers", g.serveCallers)
	mux.Handle("GET /admin/state", g.auth(token, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(g.State())
	}))
	mux.Handle("GET /admin/release", g.auth(token, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(g.Releases())
	}))
	for path, drain := range map[string]bool{"POST /admin/drain": true, "POST /admin/undrain": false} {
		mux.Handle(path, g.auth(token, func(w http.ResponseWriter, r *http.Request) {
			q := r.URL.Query()
			if err := g.Drain(q.Get("cluster"), q.Get("backend"), drain); err != nil {
				http.Error(w, err.Error(), http.StatusNotFound)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(g.State())
		}))
	}
	g.mountAsyncAdmin(mux, token)
	// the Go runtime's profiles (heap, goroutine, allocs, CPU for
	// ?seconds=N), behind the token: a heap dump is the gateway's memory
	mux.Handle("GET /debug/pprof/", g.auth(token, obs.Profiles().ServeHTTP))
	return mux
}

func (g *Gateway) auth(token string, h http.HandlerFunc) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token == "" {
			http.Error(w, "admin API disabled: set admin.token", http.StatusForbidden)
			return
		}
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h(w, r)
	})
}

func newServerLog(l *slog.Logger) *log.Logger {
	return slog.NewLogLogger(l.Handler(), slog.LevelDebug)
}
