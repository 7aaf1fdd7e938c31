package shed

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

type nopWriter struct{ h http.Header }

func (w *nopWriter) Header() http.Header         { return w.h }
func (w *nopWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *nopWriter) WriteHeader(int)             {}

// BenchmarkContender measures each contender's unloaded path around a mux
// with a no-op route: go test -bench Contender -benchmem -cpu 2 ./shed
func BenchmarkContender(b *testing.B) {
	for _, name := range Contenders {
		b.Run(name, func(b *testing.B) {
			mux := http.NewServeMux()
			mux.HandleFunc("GET /a", func(http.ResponseWriter, *http.Request) {})
			h, closeFn, err := Wrap(name, mux)
			if err != nil {
				b.Fatal(err)
			}
			defer closeFn()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				req := httptest.NewRequest(http.MethodGet, "/a", nil)
				w := &nopWriter{h: http.Header{}}
				for pb.Next() {
					h.ServeHTTP(w, req)
				}
			})
		})
	}
}

func TestWrapEveryContender(t *testing.T) {
	for _, name := range Contenders {
		mux := http.NewServeMux()
		mux.HandleFunc("GET /a", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
		h, closeFn, err := Wrap(name, mux)
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/a", nil))
		closeFn()
		if rec.Code != http.StatusTeapot {
			t.Errorf("%s: status %d, want the handler's 418", name, rec.Code)
		}
	}
	if _, _, err := Wrap("nope", http.NewServeMux()); err == nil {
		t.Error("unknown contender accepted")
	}
}
