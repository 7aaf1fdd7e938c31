package asyncnats

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/async"
	"github.com/veerhq/veer/obs"
)

// backend counts attempts by invocation id and answers with the statuses
// given per path (200 when none).
type backend struct {
	mu     sync.Mutex
	seen   map[string]int
	hdrs   map[string]http.Header
	status map[string][]int // path -> statuses of successive attempts
	done   chan string
	srv    *httptest.Server
}

func newBackend(t *testing.T) *backend {
	b := &backend{seen: map[string]int{}, hdrs: map[string]http.Header{}, status: map[string][]int{}, done: make(chan string, 1000)}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		id := r.Header.Get(async.IDHeader)
		b.mu.Lock()
		b.seen[id]++
		b.hdrs[id] = r.Header.Clone()
		code := http.StatusOK
		if s := b.status[r.URL.Path]; len(s) > 0 {
			code, b.status[r.URL.Path] = s[0], s[1:]
		}
		b.mu.Unlock()
		w.WriteHeader(code)
		if code < 300 {
			b.done <- id
		}
	}))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *backend) dispatcher() async.Dispatcher {
	return async.DispatcherFunc(func(ctx context.Context, req *http.Request, inv *async.Invocation) (*http.Response, error) {
		req.URL.Host = strings.TrimPrefix(b.srv.URL, "http://")
		return http.DefaultTransport.RoundTrip(req)
	})
}

func openEmbedded(t *testing.T, dir string, cfg async.Config) *Engine {
	t.Helper()
	cfg.Dir = dir
	e, err := Open(cfg, Options{Logger: obs.Discard})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// states collects the statuses workers record, by id.
type states struct {
	mu   sync.Mutex
	last map[string]async.Status
	all  map[string][]async.Status
	ch   chan async.Status
}

func newStates() *states {
	return &states{last: map[string]async.Status{}, all: map[string][]async.Status{}, ch: make(chan async.Status, 100000)}
}

func (s *states) on(st async.Status) {
	s.mu.Lock()
	s.last[st.ID] = st
	s.all[st.ID] = append(s.all[st.ID], st)
	s.mu.Unlock()
	s.ch <- st
}

// wait returns once id reaches want.
func (s *states) wait(t *testing.T, id string, want async.State) async.Status {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		s.mu.Lock()
		st, ok := s.last[id]
		s.mu.Unlock()
		if ok && st.State == want {
			return st
		}
		select {
		case <-s.ch:
		case <-timeout:
			t.Fatalf("status of %s: %+v, want %s within 30s", id, st, want)
		}
	}
}

func newService(t *testing.T, e *Engine, cfg async.Config, d async.Dispatcher, sts *states) *async.Service {
	t.Helper()
	opts := async.Options{Logger: obs.Discard, Registerer: prometheus.NewRegistry()}
	if sts != nil {
		opts.OnStatus = sts.on
	}
	s, err := async.New(cfg, e, d, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func waitDone(t *testing.T, b *backend, n int) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for range n {
		select {
		case <-b.done:
		case <-timeout:
			t.Fatalf("backend saw fewer than %d successful invocations in 30s", n)
		}
	}
}

func TestSubmitRunStatus(t *testing.T) {
	b := newBackend(t)
	e := openEmbedded(t, t.TempDir(), async.Config{})
	sts := newStates()
	s := newService(t, e, async.Config{}, b.dispatcher(), sts)
	defer s.Close()
	ctx := context.Background()
	inv := &async.Invocation{Tenant: "acme", Route: "r", Method: "POST", Host: "example.com", Path: "/work?x=1",
		Header: http.Header{"X-Thing": {"1"}}, Body: []byte("hello"), Key: "k-1"}
	id, existing, err := s.Submit(ctx, inv)
	if err != nil || existing {
		t.Fatalf("Submit = %q, %v, %v", id, existing, err)
	}
	st, err := s.Status(ctx, "acme", id)
	if err != nil || st.State != async.Queued {
		t.Fatalf("Status before any worker = %+v, %v; want queued", st, err)
	}
	if _, err := s.Status(ctx, "other", id); !errors.Is(err, async.ErrNotFound) {
		t.Fatalf("another tenant's Status: %v, want ErrNotFound", err)
	}
	// the same key again: the same id, nothing stored
	id2, existing, err := s.Submit(ctx, &async.Invocation{Tenant: "acme", Method: "POST", Host: "example.com", Path: "/work", Key: "k-1"})
	if err != nil || !existing || id2 != id {
		t.Fatalf("resubmit = %q, %v, %v; want %q, true", id2, existing, err, id)
	}
	// the same key for another tenant is another invocation
	id3, existing, err := s.Submit(ctx, &async.Invocation{Tenant: "beta", Method: "POST", Host: "example.com", Path: "/work", Key: "k-1"})
	if err != nil || existing || id3 == id {
		t.Fatalf("other tenant's submit = %q, %v, %v; want a new id", id3, existing, err)
	}
	s.Start()
	waitDone(t, b, 2)
	b.mu.Lock()
	h := b.hdrs[id]
	b.mu.Unlock()
	if h.Get(async.IDHeader) != id || h.Get("Idempotency-Key") != "k-1" || h.Get("X-Thing") != "1" || h.Get(async.AttemptHeader) != "1" {
		t.Fatalf("upstream headers = %v", h)
	}
	sts.wait(t, id, async.Succeeded)
	st, err = s.Status(ctx, "acme", id)
	if err != nil || st.State != async.Succeeded || st.UpstreamStatus != 200 || st.Attempts != 1 {
		t.Fatalf("status = %+v", st)
	}
	list, next, err := s.List(ctx, "acme", 0, 10)
	if err != nil || len(list) != 1 || list[0].ID != id || next != 0 {
		t.Fatalf("List = %+v, %d, %v", list, next, err)
	}
}
