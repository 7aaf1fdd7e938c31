// Package storetest is the contract test suite every store.Store backend
// runs: versions and optimistic concurrency, history, listing with a
// revision, watching from a revision, and Follow's convergence.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/veerhq/veer/store"
)

// Run runs the contract suite; open returns a fresh, empty store, closed
// by the caller's cleanup.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	t.Run("VersionsAndConflicts", func(t *testing.T) { versions(t, open(t)) })
	t.Run("HistoryAcrossDelete", func(t *testing.T) { history(t, open(t)) })
	t.Run("NoHistoryWrites", func(t *testing.T) { noHistory(t, open(t)) })
	t.Run("ListWithRevision", func(t *testing.T) { list(t, open(t)) })
	t.Run("WatchFromRevision", func(t *testing.T) { watch(t, open(t)) })
	t.Run("ConcurrentWritersOneWins", func(t *testing.T) { race(t, open(t)) })
	t.Run("InvalidKeys", func(t *testing.T) { invalid(t, open(t)) })
	t.Run("FollowConverges", func(t *testing.T) { followConverges(t, open(t)) })
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func versions(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	if _, err := s.Get(ctx, "a/x"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get missing: %v, want ErrNotFound", err)
	}
	steps := []struct {
		expect  int64
		value   string
		wantErr error
		wantVer int64
	}{
		{store.Absent, "one", nil, 1},
		{store.Absent, "again", store.ErrConflict, 1},
		{1, "two", nil, 2},
		{1, "stale", store.ErrConflict, 2},
		{7, "future", store.ErrConflict, 2},
		{store.Any, "three", nil, 3},
		{3, "four", nil, 4},
	}
	for i, st := range steps {
		d, err := s.Put(ctx, "a/x", []byte(st.value), store.Write{Expect: st.expect, Author: "t"})
		if !errors.Is(err, st.wantErr) {
			t.Fatalf("step %d: Put(expect %d): %v, want %v", i, st.expect, err, st.wantErr)
		}
		if err == nil && (d.Version != st.wantVer || string(d.Value) != st.value || d.Revision <= 0) {
			t.Fatalf("step %d: Put returned %+v, want version %d", i, d, st.wantVer)
		}
		g, err := s.Get(ctx, "a/x")
		if err != nil || g.Version != st.wantVer {
			t.Fatalf("step %d: Get: %+v %v, want version %d", i, g, err, st.wantVer)
		}
	}
	if err := s.Delete(ctx, "a/x", store.Write{Expect: 3}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("Delete(expect 3) of v4: %v, want ErrConflict", err)
	}
	if err := s.Delete(ctx, "a/x", store.Write{Expect: 4}); err != nil {
		t.Fatalf("Delete(expect 4): %v", err)
	}
	if err := s.Delete(ctx, "a/x", store.Write{}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Delete missing: %v, want ErrNotFound", err)
	}
}

func history(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	put(t, s, ctx, "h/k", []byte("v1"), store.Write{Author: "ann", Reason: "create"})
	put(t, s, ctx, "h/k", []byte("v2"), store.Write{Expect: 1, Author: "bob", Reason: "edit"})
	put(t, s, ctx, "h/other", []byte("o1"), store.Write{})
	if err := s.Delete(ctx, "h/k", store.Write{Author: "cy", Reason: "drop"}); err != nil {
		t.Fatal(err)
	}
	d, err := s.Put(ctx, "h/k", []byte("v4"), store.Write{Expect: store.Absent, Author: "dee"})
	if err != nil || d.Version != 4 {
		t.Fatalf("re-create: %+v %v, want version 4 (versions never reused)", d, err)
	}
	hs, err := s.History(ctx, "h/k", 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range hs {
		if h.Key != "h/k" {
			continue
		}
		got = append(got, fmt.Sprintf("v%d %s %q->%q del=%v %s", h.Version, h.Author, h.Before, h.After, h.Deleted, h.Reason))
	}
	want := []string{
		`v4 dee ""->"v4" del=false `,
		`v3 cy "v2"->"" del=true drop`,
		`v2 bob "v1"->"v2" del=false edit`,
		`v1 ann ""->"v1" del=false create`,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("history:\n got %q\nwant %q", got, want)
	}
	for i := 1; i < len(hs); i++ {
		if hs[i].Revision >= hs[i-1].Revision || hs[i].Time.IsZero() {
			t.Fatalf("history not newest first with times: %+v", hs)
		}
	}
	all, err := s.History(ctx, "h/", 2)
	if err != nil || len(all) != 2 || all[0].Version != 4 {
		t.Fatalf("History(h/, 2): %+v %v", all, err)
	}
}

// noHistory: a NoHistory Put is a write like any other (versions, watch,
// list) but not in the history; the next recorded change replaced its
// value; deletes are recorded all the same.
func noHistory(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	w := store.Write{Author: "gw", Reason: "counts", NoHistory: true}
	events := s.Watch(ctx, "n/", 1)
	for i := 1; i <= 3; i++ {
		if d := put(t, s, ctx, "n/k", []byte(fmt.Sprint("c", i)), w); d.Version != int64(i) {
			t.Fatalf("NoHistory put %d: version %d", i, d.Version)
		}
	}
	for i := 1; i <= 3; i++ {
		if ev := <-events; ev.Type != store.Put || string(ev.Doc.Value) != fmt.Sprint("c", i) {
			t.Fatalf("watch event %d: %+v", i, ev)
		}
	}
	if hs, err := s.History(ctx, "n/", 0); err != nil || len(hs) != 0 {
		t.Fatalf("history after NoHistory puts: %+v %v, want none", hs, err)
	}
	if d := put(t, s, ctx, "n/k", []byte("edit"), store.Write{Expect: 3, Author: "op"}); d.Version != 4 {
		t.Fatalf("recorded put after NoHistory ones: version %d, want 4", d.Version)
	}
	if err := s.Delete(ctx, "n/k", w); err != nil {
		t.Fatal(err)
	}
	if d := put(t, s, ctx, "n/k", []byte("c6"), w); d.Version != 6 {
		t.Fatalf("NoHistory re-create: version %d, want 6 (versions never reused)", d.Version)
	}
	hs, err := s.History(ctx, "n/", 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range hs {
		got = append(got, fmt.Sprintf("v%d %s %q->%q del=%v", h.Version, h.Author, h.Before, h.After, h.Deleted))
	}
	want := []string{`v5 gw "edit"->"" del=true`, `v4 op "c3"->"edit" del=false`}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("history:\n got %q\nwant %q", got, want)
	}
	if d, err := s.Get(ctx, "n/k"); err != nil || string(d.Value) != "c6" || d.Version != 6 {
		t.Fatalf("Get: %+v %v", d, err)
	}
}

func list(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	put(t, s, ctx, "l/b", []byte("b"), store.Write{})
	last := put(t, s, ctx, "l/a", []byte("a"), store.Write{})
	put(t, s, ctx, "m/c", []byte("c"), store.Write{})
	docs, rev, err := s.List(ctx, "l/")
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 2 || docs[0].Key != "l/a" || docs[1].Key != "l/b" || string(docs[0].Value) != "a" {
		t.Fatalf("List(l/) = %+v", docs)
	}
	if rev <= last.Revision {
		t.Fatalf("List revision %d, want > %d (m/c came later)", rev, last.Revision)
	}
}

func next(t *testing.T, ch <-chan store.Event) store.Event {
	t.Helper()
	select {
	case e, ok := <-ch:
		if !ok {
			t.Fatal("watch closed")
		}
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event within 10s")
	}
	return store.Event{}
}

func watch(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	first := put(t, s, ctx, "w/a", []byte("1"), store.Write{})
	_, rev, err := s.List(ctx, "w/")
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	live := s.Watch(wctx, "w/", rev+1)
	put(t, s, ctx, "x/ignored", []byte("x"), store.Write{})
	put(t, s, ctx, "w/b", []byte("2"), store.Write{})
	if err := s.Delete(ctx, "w/a", store.Write{}); err != nil {
		t.Fatal(err)
	}
	e1, e2 := next(t, live), next(t, live)
	if e1.Type != store.Put || e1.Doc.Key != "w/b" || string(e1.Doc.Value) != "2" || e1.Doc.Version != 1 {
		t.Fatalf("event 1 = %+v, want put w/b", e1)
	}
	if e2.Type != store.Delete || e2.Doc.Key != "w/a" || e2.Doc.Revision <= e1.Doc.Revision {
		t.Fatalf("event 2 = %+v, want delete w/a after %d", e2, e1.Doc.Revision)
	}
	// From an old revision: the whole story replays.
	old := s.Watch(wctx, "w/", first.Revision)
	var kinds []string
	for range 3 {
		e := next(t, old)
		kinds = append(kinds, e.Type.String()+" "+e.Doc.Key)
	}
	if fmt.Sprint(kinds) != "[put w/a put w/b delete w/a]" {
		t.Fatalf("replay = %v", kinds)
	}
	cancel()
	for range live {
	}
}

func race(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	d := put(t, s, ctx, "r/k", []byte("0"), store.Write{})
	const n = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, conflicts := 0, 0
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Put(ctx, "r/k", []byte(fmt.Sprint(i)), store.Write{Expect: d.Version})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, store.ErrConflict):
				conflicts++
			default:
				t.Errorf("Put: %v", err)
			}
		}()
	}
	wg.Wait()
	if wins != 1 || conflicts != n-1 {
		t.Fatalf("wins %d conflicts %d, want 1 and %d", wins, conflicts, n-1)
	}
	// Unconditional writers all land, each with its own version.
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Put(ctx, "r/any", []byte(fmt.Sprint(i)), store.Write{}); err != nil {
				t.Errorf("Put(Any): %v", err)
			}
		}()
	}
	wg.Wait()
	g, err := s.Get(ctx, "r/any")
	if err != nil || g.Version != n {
		t.Fatalf("after %d Any writers: %+v %v", n, g, err)
	}
}

func invalid(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	for _, k := range []string{"", "/abs", "a/../b", "sp ace", "nul\x00", string(make([]byte, store.MaxKeyLen+1))} {
		if _, err := s.Put(ctx, k, []byte("v"), store.Write{}); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Put(%q): %v, want ErrInvalid", k, err)
		}
	}
}

func followConverges(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	put(t, s, ctx, "f/a", []byte("1"), store.Write{})
	fctx, cancel := context.WithCancel(ctx)
	snaps := make(chan *store.Snapshot, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		store.Follow(fctx, s, "f/", store.FollowOptions{}, func(sn *store.Snapshot) { snaps <- sn })
	}()
	first := <-snaps
	if string(first.Docs["f/a"].Value) != "1" {
		t.Fatalf("first snapshot %+v", first.Docs)
	}
	put(t, s, ctx, "f/b", []byte("2"), store.Write{})
	last := put(t, s, ctx, "f/a", []byte("3"), store.Write{})
	for {
		sn := <-snaps
		if sn.Revision >= last.Revision {
			if len(sn.Docs) != 2 || string(sn.Docs["f/a"].Value) != "3" || string(sn.Docs["f/b"].Value) != "2" {
				t.Fatalf("converged snapshot %+v", sn.Docs)
			}
			if string(first.Docs["f/a"].Value) != "1" {
				t.Fatal("an earlier snapshot was modified")
			}
			break
		}
	}
	cancel()
	<-done
}

func put(t *testing.T, s store.Store, ctx context.Context, key string, value []byte, w store.Write) store.Doc {
	t.Helper()
	d, err := s.Put(ctx, key, value, w)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
