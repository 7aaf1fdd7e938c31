package shed

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

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
	s, _ := newShedder(b, Config{})
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
