package shed

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/veerhq/veer/shed/internal/runq"
	"github.com/veerhq/veer/tier"
)

// nopWriter is a ResponseWriter that allocates nothing, so the benchmarks
// measure the middleware rather than the recorder.
type nopWriter struct{ h http.Header }

func (w *nopWriter) Header() http.Header         { return w.h }
func (w *nopWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *nopWriter) WriteHeader(int)             {}

func benchMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /trips/{id}", func(http.ResponseWriter, *http.Request) {})
	return mux
}

func benchServe(b *testing.B, h http.Handler, hdr http.Header) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		req := httptest.NewRequest(http.MethodGet, "/trips/42", nil)
		req.Header = hdr.Clone()
		w := &nopWriter{h: http.Header{}}
		for pb.Next() {
			h.ServeHTTP(w, req)
		}
	})
}

// BenchmarkBareMux is the baseline: the mux alone.
func BenchmarkBareMux(b *testing.B) { benchServe(b, benchMux(), http.Header{}) }

// BenchmarkMiddlewareUnloaded is the unloaded path: a request with no
// criticality header through the middleware and the mux. The overhead is
// the difference with BenchmarkBareMux.
func BenchmarkMiddlewareUnloaded(b *testing.B) {
	s, _ := newShedder(b, Config{})
	benchServe(b, s.Middleware(benchMux()), http.Header{})
}

// BenchmarkMiddlewareUnloadedWithTier adds Veer-Criticality and Rpc-Caller,
// which the middleware puts in the request's context.
func BenchmarkMiddlewareUnloadedWithTier(b *testing.B) {
	s, _ := newShedder(b, Config{})
	h := http.Header{}
	tier.SetHeader(h, tier.Critical, "checkout")
	benchServe(b, s.Middleware(benchMux()), h)
}

// BenchmarkAcquireRelease is the admission core alone.
func BenchmarkAcquireRelease(b *testing.B) {
	s, _ := newShedder(b, Config{})
	ctx := httptest.NewRequest(http.MethodGet, "/", nil).Context()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			tk, err := s.Acquire(ctx, "e", tier.SheddablePlus)
			if err != nil {
				b.Error(err)
				return
			}
			tk.Release()
		}
	})
}

// BenchmarkMiddlewareInsideMux mounts the middleware on the route, inside
// the mux: the endpoint is r.Pattern, so the mux matches only once.
func BenchmarkMiddlewareInsideMux(b *testing.B) {
	s, _ := newShedder(b, Config{})
	mux := http.NewServeMux()
	mux.Handle("GET /trips/{id}", s.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	benchServe(b, mux, http.Header{})
}

// BenchmarkRejection is the middleware's path for a request refused on
// arrival (its tier is below the one being shed): endpoint lookup, the
// admission check and the 503 with its headers and body. The writer's
// header map is cleared per request (net/http makes a new one, whose
// allocation is the server's, not the middleware's). The storm bench
// (bench/cmd/shedbench scenario 7) measures the whole server's CPU per
// request, parsing and system calls included.
func BenchmarkRejection(b *testing.B) {
	s, _ := newShedder(b, Config{RejectHold: -1}) // the refusal's cost, not the storm's pacing (pace.go)
	s.rq = nil
	h := s.Middleware(benchMux())
	st := s.stage("GET /trips/{id}")
	st.mu.Lock()
	st.lastOver = time.Now().Add(time.Hour) // shedding for the whole run
	st.mu.Unlock()
	st.floor.Store(uint32(tier.Critical))
	st.shedding.Store(true)
	hdr := http.Header{tier.Header: {"sheddable"}}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		req := httptest.NewRequest(http.MethodGet, "/trips/42", nil)
		req.Header = hdr.Clone()
		w := &nopWriter{h: http.Header{}}
		for pb.Next() {
			clear(w.h)
			h.ServeHTTP(w, req)
		}
	})
}

// BenchmarkSaturated is the middleware's CPU per request under a CPU-bound
// overload on one processor (GOMAXPROCS=1): 64 goroutines, each a closed-loop
// client whose handler computes for about 5 µs, with the real run-queue
// probe. Requests are of tiers that are never shed, so none is shed and the
// endpoint queues, so an admitted request yields while the run queue is busy:
// one tier (critical, a gateway's default) or two (every other client
// critical_plus). The figure is the process's CPU time (getrusage) per
// request, handler included; the yield is poll (runq.Yield, what runs),
// gosched (runtime.Gosched) or none, so its cost is poll - none in the same
// run. yields/op counts the yields.
func BenchmarkSaturated(b *testing.B) {
	for _, tiers := range []struct {
		name string
		of   [2]string
	}{{"one-tier", [2]string{"critical", "critical"}}, {"two-tiers", [2]string{"critical", "critical_plus"}}} {
		for _, c := range []struct {
			name  string
			yield func()
		}{{"poll", runq.Yield}, {"gosched", runtime.Gosched}, {"none", func() {}}} {
			b.Run(tiers.name+"/"+c.name, func(b *testing.B) {
				benchSaturated(b, c.yield, tiers.of)
			})
		}
	}
}

func benchSaturated(b *testing.B, yield func(), tiers [2]string) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	s, _ := newShedder(b, Config{})
	var yields atomic.Int64
	s.yield = func() { yields.Add(1); yield() }
	var sink atomic.Uint64
	h := s.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		x := uint64(1)
		for i := range 5000 { // about 5 µs
			x = x*6364136223846793005 + uint64(i)
		}
		sink.Add(x)
	}))
	const clients = 64
	var shed, next atomic.Int64
	var wg sync.WaitGroup
	cpu0, _ := runq.ProcessCPU()
	b.ResetTimer()
	for i := range clients {
		wg.Go(func() {
			req := httptest.NewRequest(http.MethodGet, "/trips/42", nil)
			req.Header = http.Header{tier.Header: {tiers[i%2]}}
			w := &statusWriter{h: http.Header{}}
			for next.Add(1) <= int64(b.N) {
				clear(w.h)
				w.code = 0
				h.ServeHTTP(w, req)
				if w.code == http.StatusServiceUnavailable {
					shed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	cpu1, _ := runq.ProcessCPU()
	b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(shed.Load())/float64(b.N), "shed/op")
	b.ReportMetric(float64(yields.Load())/float64(b.N), "yields/op")
}

// statusWriter is a nopWriter that keeps the status code.
type statusWriter struct {
	h    http.Header
	code int
}

func (w *statusWriter) Header() http.Header         { return w.h }
func (w *statusWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *statusWriter) WriteHeader(c int)           { w.code = c }
