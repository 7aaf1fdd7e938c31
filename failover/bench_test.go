package failover

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

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
// added cost from network noise; "-backup" runs the Transport in BACKUP,
// where every request is rewritten; "inmem-parallel" runs on every P.

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
	b.Run("net=loopback/rt=bare", func(b *testing.B) {
		next := &http.Transport{MaxIdleConnsPerHost: 4}
		defer next.CloseIdleConnections()
		loop(b, next, srv.URL+"/")
	})
	b.Run("net=loopback/rt=failover", func(b *testing.B) {
		next := &http.Transport{MaxIdleConnsPerHost: 4}
		defer next.CloseIdleConnections()
		loop(b, benchTransport(b, next, host), srv.URL+"/")
	})
	// BACKUP over loopback: the same server under two names (localhost and
	// 127.0.0.1), the Transport restored onto the second, so every request
	// is rewritten.
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	b.Run("net=loopback-backup/rt=bare", func(b *testing.B) {
		next := &http.Transport{MaxIdleConnsPerHost: 4}
		defer next.CloseIdleConnections()
		loop(b, next, fmt.Sprintf("http://127.0.0.1:%d/", port))
	})
	b.Run("net=loopback-backup/rt=failover", func(b *testing.B) {
		next := &http.Transport{MaxIdleConnsPerHost: 4}
		defer next.CloseIdleConnections()
		tr := benchBackupOver(b, next, fmt.Sprintf("localhost:%d", port), fmt.Sprintf("127.0.0.1:%d", port))
		loop(b, tr, fmt.Sprintf("http://localhost:%d/", port))
	})
	b.Run("net=inmem/rt=bare", func(b *testing.B) {
		loop(b, instant{}, "http://api.example.com/")
	})
	b.Run("net=inmem/rt=failover", func(b *testing.B) {
		loop(b, benchTransport(b, instant{}, "api.example.com"), "http://api.example.com/")
	})
	b.Run("net=inmem-backup/rt=bare", func(b *testing.B) {
		loop(b, instant{}, "http://api.example.com/")
	})
	b.Run("net=inmem-backup/rt=failover", func(b *testing.B) {
		loop(b, benchBackup(b), "http://api.example.com/")
	})
	b.Run("net=inmem-parallel/rt=bare", func(b *testing.B) {
		parallel(b, instant{})
	})
	b.Run("net=inmem-parallel/rt=failover", func(b *testing.B) {
		parallel(b, benchTransport(b, instant{}, "api.example.com"))
	})
}

// benchBackup is a Transport in BACKUP (restored from its store), so that
// every request is rewritten.
func benchBackup(b *testing.B) *Transport {
	return benchBackupOver(b, instant{}, "api.example.com", "backup.invalid")
}

func benchBackupOver(b *testing.B, next http.RoundTripper, primary, backup string) *Transport {
	store := FileStore(filepath.Join(b.TempDir(), "f.json"))
	if err := store.Save(backup); err != nil {
		b.Fatal(err)
	}
	tr, err := NewTransport(Config{
		Primary:    primary,
		Backups:    []string{backup},
		Store:      store,
		Registerer: prometheus.NewRegistry(),
		Logger:     obs.Discard,
		// no recovery probe during the benchmark
		RecoveryTimeout: time.Hour,
	}, next)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if tr.State() != Backup {
			b.Errorf("transport left BACKUP: %v", tr.State())
		}
		tr.Close()
	})
	return tr
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

// instantBody answers at once with a response that has a body (an empty
// one, without allocating).
type instantBody struct{ resp *http.Response }

type emptyBody struct{}

func (emptyBody) Read([]byte) (int, error) { return 0, io.EOF }
func (emptyBody) Close() error             { return nil }

func (i instantBody) RoundTrip(*http.Request) (*http.Response, error) {
	i.resp.Body = emptyBody{}
	return i.resp, nil
}

// TestSteadyStateAllocs: on primary a request addressed to the primary goes
// out as it is (no allocation); on another domain the Transport allocates
// once, the rewritten copy of the request with its URL; a response with a
// body costs one more, the wrapper that watches body-read errors. The
// issue's target is at most two.
func TestSteadyStateAllocs(t *testing.T) {
	for _, c := range []struct {
		name, url string
		restored  bool
		body      bool
		want      float64
	}{
		{"primary", "http://api.example.com/x", false, false, 0},
		{"primary with port", "http://api.example.com:8080/x", false, false, 0},
		{"backup", "http://api.example.com/x", true, false, 1},
		{"primary with body", "http://api.example.com/x", false, true, 1},
		{"backup with body", "http://api.example.com/x", true, true, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := Config{
				Primary: "api.example.com", Backups: []string{"backup.invalid"},
				Registerer: prometheus.NewRegistry(), Logger: obs.Discard,
			}
			if c.restored {
				cfg.Store = FileStore(filepath.Join(t.TempDir(), "f.json"))
				if err := cfg.Store.Save("backup.invalid"); err != nil {
					t.Fatal(err)
				}
			}
			var next http.RoundTripper = instant{}
			if c.body {
				next = instantBody{&http.Response{StatusCode: 200, Header: http.Header{}}}
			}
			tr, err := NewTransport(cfg, next)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			req, _ := http.NewRequest("GET", c.url, nil)
			allocs := testing.AllocsPerRun(1000, func() {
				if _, err := tr.RoundTrip(req); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != c.want {
				t.Fatalf("%v allocations per request, want %v", allocs, c.want)
			}
		})
	}
}
