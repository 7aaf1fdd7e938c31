package up

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
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
	PathRuns = "/_demo/runs"
	// PathProfile is the release route (bad-release, good-release): a
	// rollout moves its tenants from cluster a1 to a2.
	PathProfile = "/api/profile"
	// PathFault is a backend's switch for a bad version of PathProfile:
	// POST ?errors=SHARE&slow=FACTOR (0 and 1: healthy).
	PathFault     = "/_demo/fault"
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
	// the profile service's version: a share of 500s and a slowdown
	errBits  atomic.Uint64 // math.Float64bits of the error share
	slowBits atomic.Uint64 // math.Float64bits of the latency factor
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
	mux.HandleFunc(PathSearch, work(cfg.CPU, cfg.Latency, nil)) // the limited route (engines.go)
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
	// the release route: like /api/trips, unless told to be a bad version
	mux.HandleFunc(PathProfile, func(w http.ResponseWriter, r *http.Request) {
		if failed(r.Header.Get(headerRequest), math.Float64frombits(be.errBits.Load())) {
			spin(cfg.CPU)
			w.Header().Set(HeaderCluster, cluster)
			http.Error(w, "bad version", http.StatusInternalServerError)
			return
		}
		f := max(1, math.Float64frombits(be.slowBits.Load()))
		work(time.Duration(f*float64(cfg.CPU)), time.Duration(f*float64(cfg.Latency)), nil)(w, r)
	})
	mux.HandleFunc("POST "+PathFault, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		e, err1 := strconv.ParseFloat(cmp.Or(q.Get("errors"), "0"), 64)
		f, err2 := strconv.ParseFloat(cmp.Or(q.Get("slow"), "1"), 64)
		if err1 != nil || err2 != nil || !(e >= 0 && e <= 1) || !(f >= 1 && f <= 100) {
			http.Error(w, "errors: a share in [0, 1]; slow: a factor in [1, 100]", http.StatusBadRequest)
			return
		}
		be.errBits.Store(math.Float64bits(e))
		be.slowBits.Store(math.Float64bits(f))
		w.WriteHeader(http.StatusNoContent)
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

// headerRequest numbers a request of the release load: a bad version
// fails the same requests on every backend (a bug, not a flaky machine),
// so that the gateway's retry on the cluster's other backend fails too.
const headerRequest = "Veer-Demo-Request"

// failed says whether a bad version with the share fails the request:
// by a hash of its number when it has one, else at random.
func failed(n string, share float64) bool {
	if share <= 0 {
		return false
	}
	if n == "" {
		return rand.Float64() < share
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(n))
	return float64(h.Sum64()%10000) < share*10000
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
