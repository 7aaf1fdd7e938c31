package up

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/veerhq/veer/async"
)

// Paths the demo backends serve. /api/trips is the critical core flow,
// /api/feed a sheddable feature, /healthz the gateway's active check. The
// clients' canaries ask the gateway's own outcome.HealthPath, which the
// gateway answers itself (issue 27), so the backends need not.
const (
	PathTrips = "/api/trips"
	PathFeed  = "/api/feed"
	// PathReports is the async route: the gateways answer 202 and run each
	// invocation later against the backends.
	PathReports = "/api/reports"
	// PathRuns is the backends' record of the async invocations they ran
	// (GET ?after=SEQ, a Runs), for async-kill's count by id.
	PathRuns      = "/_demo/runs"
	BackendHealth = "/healthz"
	HeaderCluster = "Veer-Demo-Cluster"
	headerBackend = "Veer-Demo-Backend"
)

// BackendHandler is a demo backend of cluster: real CPU (a spin) and a
// dependency wait per request, its cluster in a response header.
func BackendHandler(cluster, name string, cfg BackendConfig) http.Handler {
	return newBackend(cluster, name, cfg).mux
}

type backend struct {
	mux  *http.ServeMux
	runs *runLog
}

func newBackend(cluster, name string, cfg BackendConfig) *backend {
	cfg = Config{Backend: cfg}.withDefaults().Backend
	mux := http.NewServeMux()
	be := &backend{mux: mux, runs: newRunLog(maxRuns)}
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
	// an async invocation: a report takes its time; it is recorded as
	// run (by invocation id and idempotency key) when it is done
	report := work(cfg.CPU, cfg.Report, nil)
	mux.HandleFunc(PathReports, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
		rec := &statusRecorder{ResponseWriter: w}
		report(rec, r)
		if rec.status == http.StatusOK {
			be.runs.add(r.Header.Get(async.IDHeader), r.Header.Get(async.KeyHeader))
		}
	})
	mux.HandleFunc("GET "+PathRuns, func(w http.ResponseWriter, r *http.Request) {
		after, err := strconv.ParseUint(cmp.Or(r.URL.Query().Get("after"), "0"), 10, 64)
		if err != nil {
			http.Error(w, "after: a sequence number", http.StatusBadRequest)
			return
		}
		writeJSONResponse(w, be.runs.since(after))
	})
	return be
}

// statusRecorder notes whether a handler wrote its answer.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
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
		hs := &http.Server{Handler: newBackend(cluster, fmt.Sprintf("%s-%d", cluster, i+1), cfg).mux, ReadHeaderTimeout: 5 * time.Second}
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
