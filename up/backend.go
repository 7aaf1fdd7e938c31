package up

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"sync"
	"time"
)

// Paths the demo backends serve. /api/trips is the critical core flow,
// /api/feed a sheddable feature, /healthz the gateway's active check. The
// clients' canaries ask the gateway's own outcome.HealthPath, which the
// gateway answers itself (issue 27), so the backends need not.
const (
	PathTrips     = "/api/trips"
	PathFeed      = "/api/feed"
	BackendHealth = "/healthz"
	HeaderCluster = "Veer-Demo-Cluster"
	headerBackend = "Veer-Demo-Backend"
)

// BackendHandler is a demo backend of cluster: real CPU (a spin) and a
// dependency wait per request, its cluster in a response header.
func BackendHandler(cluster, name string, cfg BackendConfig) http.Handler {
	cfg = Config{Backend: cfg}.withDefaults().Backend
	mux := http.NewServeMux()
	ok := func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }
	mux.HandleFunc(BackendHealth, ok)
	work := func(cpu, wait time.Duration, slots chan struct{}) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if slots != nil {
				select {
				case slots <- struct{}{}:
					defer func() { <-slots }()
				case <-r.Context().Done():
					return
				}
			}
			spin(cpu)
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return
			}
			w.Header().Set(HeaderCluster, cluster)
			w.Header().Set(headerBackend, name)
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"cluster":%q,"backend":%q,"path":%q}`+"\n", cluster, name, r.URL.Path)
		}
	}
	mux.HandleFunc(PathTrips, work(cfg.CPU, cfg.Latency, nil))
	mux.HandleFunc(PathFeed, work(2*cfg.CPU, 2*cfg.Latency, make(chan struct{}, cfg.FeedSlots)))
	mux.HandleFunc(PathSearch, work(cfg.CPU, cfg.Latency, nil)) // the limited route (engines.go)
	return mux
}

// spin burns d of CPU time on this goroutine's thread (wall time as a
// proxy: the loop never blocks).
func spin(d time.Duration) {
	end := time.Now().Add(d)
	x := uint64(1)
	for time.Now().Before(end) {
		for range 200 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	runtime.KeepAlive(x)
}

// ServeBackends serves one cluster's backends, one listener per address,
// until ctx ends (`veer up backend`, a child process of `veer up`, so that
// SIGKILL takes the whole cluster).
func ServeBackends(ctx context.Context, cluster string, addrs []string, cfg BackendConfig) error {
	if len(addrs) == 0 {
		return errors.New("up backend: no --listen address")
	}
	var servers []*http.Server
	var wg sync.WaitGroup
	errc := make(chan error, len(addrs))
	for i, a := range addrs {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			for _, s := range servers {
				s.Close()
			}
			return err
		}
		hs := &http.Server{Handler: BackendHandler(cluster, fmt.Sprintf("%s-%d", cluster, i+1), cfg), ReadHeaderTimeout: 5 * time.Second}
		servers = append(servers, hs)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	for _, s := range servers {
		s.Close()
	}
	wg.Wait()
	return err
}
