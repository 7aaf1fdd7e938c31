package asyncnats

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/veerhq/veer/async"
	"github.com/veerhq/veer/async/asyncnats/natstest"
	"github.com/veerhq/veer/obs"
)

func openExternal(t *testing.T, url string, cfg async.Config) *Engine {
	t.Helper()
	cfg.Engine, cfg.URLs = "external", []string{url}
	e, err := Open(cfg, Options{Logger: obs.Discard})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestExternalUnreachable: with the external nats-server killed, a
// submission fails with ErrUnavailable (the handler's 503) and is not
// stored later; after a restart on the same store, submissions work again
// and the earlier ones are still there.
func TestExternalUnreachable(t *testing.T) {
	srv := natstest.Start(t, t.TempDir())
	e := openExternal(t, srv.URL(), async.Config{SubmitTimeout: time.Second})
	defer e.Close()
	s := newService(t, e, async.Config{SubmitTimeout: time.Second}, async.DispatcherFunc(nil), nil)
	defer s.Close()
	ctx := context.Background()
	before, _, err := s.Submit(ctx, &async.Invocation{Tenant: "t", Method: "POST", Host: "h", Path: "/a"})
	if err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	if _, _, err := s.Submit(ctx, &async.Invocation{Tenant: "t", Method: "POST", Host: "h", Path: "/lost"}); !errors.Is(err, async.ErrUnavailable) {
		t.Fatalf("Submit with the server down: %v, want ErrUnavailable", err)
	}
	srv.Restart()
	var after string
	for i := 0; ; i++ { // the client reconnects on its own schedule (250 ms waits)
		after, _, err = s.Submit(ctx, &async.Invocation{Tenant: "t", Method: "POST", Host: "h", Path: "/b"})
		if err == nil {
			break
		}
		if i == 100 {
			t.Fatalf("no reconnect: %v", err)
		}
		<-e.nc.StatusChanged()
	}
	list, _, err := s.List(ctx, "t", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, st := range list {
		inv, err := e.Lookup(ctx, st.ID)
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, inv.Path)
	}
	if strings.Join(paths, ",") != "/a,/b" || list[0].ID != before || list[1].ID != after {
		t.Fatalf("stored %v (%v), want /a,/b", paths, list)
	}
}

// TestAckDeadlineRedelivers: a worker that took an invocation and died
// (fetched, recorded running, never acknowledged) loses nothing: after the
// ack deadline another worker runs it.
func TestAckDeadlineRedelivers(t *testing.T) {
	b := newBackend(t)
	// unpacked: a packed member fetched here would be kept alive by this
	// engine's own pack keeper (a real crash stops it too:
	// TestAsyncCrashGatewayBatch in cmd/veer)
	cfg := async.Config{AckWait: time.Second, Batch: new(false)}
	e := openEmbedded(t, t.TempDir(), cfg)
	sts := newStates()
	s := newService(t, e, cfg, b.dispatcher(), sts)
	defer s.Close()
	ctx := context.Background()
	id, _, err := s.Submit(ctx, &async.Invocation{Tenant: "t", Method: "POST", Host: "h", Path: "/x"})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := e.FetchTenant(ctx, async.DefaultGroup, "t", 1) // the worker that dies
	if err != nil || len(ds) != 1 || ds[0].Invocation().ID != id {
		t.Fatalf("FetchTenant = %v, %v", ds, err)
	}
	if err := e.SetStatus(ctx, async.Status{ID: id, Tenant: "t", State: async.Running, Attempts: 1, FirstAttempt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	s.Start()
	waitDone(t, b, 1)
	if el := time.Since(start); el < 500*time.Millisecond {
		t.Fatalf("redelivered after %v, before the ack deadline", el)
	}
	st := sts.wait(t, id, async.Succeeded)
	if st.Attempts != 2 {
		t.Fatalf("attempts %d, want 2 (the dead worker's and the redelivery)", st.Attempts)
	}
}

// TestRestartKeepsQueue: invocations stored before the engine closed are
// run after it reopens on the same directory.
func TestRestartKeepsQueue(t *testing.T) {
	dir := t.TempDir()
	e := openEmbedded(t, dir, async.Config{})
	s := newService(t, e, async.Config{}, async.DispatcherFunc(nil), nil)
	ids := map[string]bool{}
	for i := range 20 {
		id, _, err := s.Submit(context.Background(), &async.Invocation{Tenant: "t", Method: "PUT", Host: "h", Path: fmt.Sprintf("/%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		ids[id] = true
	}
	_ = s.Close()
	b := newBackend(t)
	e2 := openEmbedded(t, dir, async.Config{})
	s2 := newService(t, e2, async.Config{}, b.dispatcher(), nil)
	s2.Start()
	defer s2.Close()
	waitDone(t, b, 20)
	b.mu.Lock()
	defer b.mu.Unlock()
	for id := range ids {
		if b.seen[id] != 1 {
			t.Errorf("%s ran %d times", id, b.seen[id])
		}
	}
}

// TestCorruptStore: a store whose message blocks are garbage or truncated
// opens (nats-server recovers with a warning) or fails with an error; it
// never panics. A store path that is a file is a clear error.
func TestCorruptStore(t *testing.T) {
	for _, mode := range []string{"garbage", "truncated", "meta"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			e := openEmbedded(t, dir, async.Config{})
			s := newService(t, e, async.Config{}, async.DispatcherFunc(nil), nil)
			for i := range 10 {
				if _, _, err := s.Submit(context.Background(), &async.Invocation{Tenant: "t", Method: "PUT", Host: "h", Path: fmt.Sprint(i)}); err != nil {
					t.Fatal(err)
				}
			}
			_ = s.Close()
			blks, _ := filepath.Glob(filepath.Join(dir, "jetstream", "*", "streams", StreamName, "msgs", "*.blk"))
			if mode == "meta" {
				blks, _ = filepath.Glob(filepath.Join(dir, "jetstream", "*", "streams", "*", "meta.inf"))
			}
			if len(blks) == 0 {
				t.Fatal("no message blocks found")
			}
			for _, f := range blks {
				switch mode {
				case "garbage", "meta":
					fi, _ := os.Stat(f)
					junk := make([]byte, fi.Size())
					for i := range junk {
						junk[i] = byte(i*7 + 3)
					}
					if err := os.WriteFile(f, junk, 0o600); err != nil {
						t.Fatal(err)
					}
				case "truncated":
					fi, _ := os.Stat(f)
					if err := os.Truncate(f, fi.Size()/2); err != nil {
						t.Fatal(err)
					}
				}
			}
			var logged bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn}))
			e2, err := Open(async.Config{Dir: dir}, Options{Logger: log})
			if err != nil {
				if !strings.Contains(err.Error(), dir) && !strings.Contains(err.Error(), "asyncnats") {
					t.Fatalf("unclear error: %v", err)
				}
				t.Logf("clear error: %v", err)
				return
			}
			if logged.Len() == 0 {
				t.Fatal("recovered from a damaged store without a warning")
			}
			t.Logf("recovered: %s", logged.String())
			defer e2.Close()
			// still usable
			s2 := newService(t, e2, async.Config{}, async.DispatcherFunc(nil), nil)
			defer s2.Close()
			if _, _, err := s2.Submit(context.Background(), &async.Invocation{Tenant: "t", Method: "PUT", Host: "h", Path: "/new"}); err != nil {
				t.Fatalf("Submit after recovery: %v", err)
			}
		})
	}
	t.Run("file", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "store")
		if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Open(async.Config{Dir: f}, Options{Logger: obs.Discard})
		if err == nil || !strings.Contains(err.Error(), "store") {
			t.Fatalf("Open on a file: %v", err)
		}
	})
}

// TestListPaging: a tenant's list in submission order, page by page,
// without another tenant's.
func TestListPaging(t *testing.T) {
	e := openEmbedded(t, t.TempDir(), async.Config{})
	s := newService(t, e, async.Config{}, async.DispatcherFunc(nil), nil)
	defer s.Close()
	var want []string
	for range 7 {
		id, _, err := s.Submit(context.Background(), &async.Invocation{Tenant: "a", Method: "POST", Host: "h", Path: "/"})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, id)
		if _, _, err := s.Submit(context.Background(), &async.Invocation{Tenant: "b.c d", Method: "POST", Host: "h", Path: "/", Header: http.Header{}}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	var cursor uint64
	pages := 0
	for {
		page, next, err := s.List(context.Background(), "a", cursor, 3)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, st := range page {
			if st.Tenant != "a" || st.State != async.Queued {
				t.Fatalf("listed %+v", st)
			}
			got = append(got, st.ID)
		}
		if next == 0 {
			break
		}
		cursor = next
	}
	if strings.Join(got, " ") != strings.Join(want, " ") || pages != 3 {
		t.Fatalf("listed %v in %d pages, want %v in 3", got, pages, want)
	}
	other, _, err := s.List(context.Background(), "b.c d", 0, 100)
	if err != nil || len(other) != 7 {
		t.Fatalf("other tenant: %d, %v", len(other), err)
	}
}

// TestPauseShared: two gateways' engines on one external nats-server. A
// group paused on one is paused on the other (its admin stats say so, and
// an invocation submitted there waits), an engine opened afterwards (a
// restart) starts with the pause, and a resume on the second gateway lets
// the invocation run, only after it.
func TestPauseShared(t *testing.T) {
	srv := natstest.Start(t, t.TempDir())
	cfg := async.Config{Groups: []async.Group{{Name: async.DefaultGroup, Concurrency: 1}}}
	eA, eB := openExternal(t, srv.URL(), cfg), openExternal(t, srv.URL(), cfg)
	b := newBackend(t)
	sts := newStates()
	sA := newService(t, eA, cfg, b.dispatcher(), sts) // either gateway may run it
	sB := newService(t, eB, cfg, b.dispatcher(), sts)
	defer sA.Close()
	defer sB.Close()
	sA.Start()
	sB.Start()
	ctx := context.Background()
	if err := sA.Pause(ctx, async.DefaultGroup, ""); err != nil {
		t.Fatal(err)
	}
	pausedOn := func(s *async.Service) bool {
		st, err := s.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range st {
			if g.Group == async.DefaultGroup {
				return g.Paused
			}
		}
		return false
	}
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !pausedOn(sB) {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatal("the pause made on gateway A never reached gateway B")
		}
	}
	eC := openExternal(t, srv.URL(), cfg)
	if m, _ := eC.Paused(ctx); !m["g:"+async.DefaultGroup] {
		t.Fatalf("an engine opened after the pause sees %v", m)
	}
	_ = eC.Close()
	id, _, err := sB.Submit(ctx, &async.Invocation{Tenant: "t", Method: "POST", Host: "h", Path: "/p"})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // five consumption intervals in which B must not start it
	if st, err := sB.Status(ctx, "t", id); err != nil || st.State != async.Queued {
		t.Fatalf("paused on A, submitted on B: %+v, %v; want queued", st, err)
	}
	resumed := time.Now()
	if err := sB.Resume(ctx, async.DefaultGroup, ""); err != nil {
		t.Fatal(err)
	}
	st := sts.wait(t, id, async.Succeeded)
	if st.FirstAttempt.Before(resumed) {
		t.Fatalf("ran at %v, before the resume at %v", st.FirstAttempt, resumed)
	}
}
