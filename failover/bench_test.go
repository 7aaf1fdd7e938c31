package failover

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/obs"
)

// The benchmarks measure what Transport adds to a request in steady PRIMARY
// state, side by side with the bare round tripper in the same run:
//
//	go test -run '^$' -bench 'Transport' -benchmem -count 10 ./failover/
//
// "loopback" sends real HTTP/1.1 requests to a local server (keep-alive);
// "inmem" wraps a round tripper that answers at once, which isolates the
// added cost from network noise.

func benchTransport(b *testing.B, next http.RoundTripper, primary string) *Transport {
	tr, err := NewTransport(Config{
		Primary:    primary,
		Backups:    []string{"backup.invalid"},
		Registerer: prometheus.NewRegistry(),
		Logger:     obs.Discard,
	}, next)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { tr.Close() })
	return tr
}

func BenchmarkTransport(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	host := srv.Listener.Addr().String()

	loop := func(b *testing.B, rt http.RoundTripper, url string) {
		req, err := http.NewRequest("GET", url, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			resp, err := rt.RoundTrip(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	b.Run("loopback/bare", func(b *testing.B) {
		next := &http.Transport{MaxIdleConnsPerHost: 4}
		defer next.CloseIdleConnections()
		loop(b, next, srv.URL+"/")
	})
	b.Run("loopback/failover", func(b *testing.B) {
		next := &http.Transport{MaxIdleConnsPerHost: 4}
		defer next.CloseIdleConnections()
		loop(b, benchTransport(b, next, host), srv.URL+"/")
	})
	b.Run("inmem/bare", func(b *testing.B) {
		loop(b, instant{}, "http://api.example.com/")
	})
	b.Run("inmem/failover", func(b *testing.B) {
		loop(b, benchTransport(b, instant{}, "api.example.com"), "http://api.example.com/")
	})
	b.Run("inmem-parallel/bare", func(b *testing.B) {
		parallel(b, instant{})
	})
	b.Run("inmem-parallel/failover", func(b *testing.B) {
		parallel(b, benchTransport(b, instant{}, "api.example.com"))
	})
}

func parallel(b *testing.B, rt http.RoundTripper) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		req, _ := http.NewRequest("GET", "http://api.example.com/", nil)
		for pb.Next() {
			resp, err := rt.RoundTrip(req)
			if err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
		}
	})
}

// instant answers every request at once with a shared 200 response.
type instant struct{}

var instantResp = &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}}

func (instant) RoundTrip(*http.Request) (*http.Response, error) { return instantResp, nil }

// TestSteadyStateAllocs: in steady PRIMARY state the Transport adds at most
// two allocations per request (the target of the issue); it is one today,
// the rewritten request with its URL.
func TestSteadyStateAllocs(t *testing.T) {
	tr, err := NewTransport(Config{
		Primary: "api.example.com", Backups: []string{"backup.invalid"},
		Registerer: prometheus.NewRegistry(), Logger: obs.Discard,
	}, instant{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	req, _ := http.NewRequest("GET", "http://api.example.com:8080/x", nil)
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := tr.RoundTrip(req); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 {
		t.Fatalf("%v allocations per request, want at most 1", allocs)
	}
}
