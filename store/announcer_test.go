package store_test

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/store"
	"github.com/veerhq/veer/store/storebolt"
)

// TestAnnounceHeartbeatsAndDeletes: Announce writes the announcement, a
// heartbeat writes it again only after someone deleted it, a clean stop
// deletes it; one without a name or admin URL is refused.
func TestAnnounceHeartbeatsAndDeletes(t *testing.T) {
	st, err := storebolt.Open(filepath.Join(t.TempDir(), "store.db"), storebolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	clk := clock.NewManual(time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := store.Announce(ctx, st, store.KeyDNSServersPrefix+"x", store.Announcement{Name: "x"}, store.AnnounceOptions{}); err == nil {
		t.Fatal("an announcement without an admin URL was accepted")
	}
	events := st.Watch(ctx, store.KeyDNSServersPrefix, 1)
	next := func(want store.EventType) store.Doc {
		t.Helper()
		select {
		case ev := <-events:
			if ev.Type != want {
				t.Fatalf("event %v %s, want %v", ev.Type, ev.Doc.Key, want)
			}
			return ev.Doc
		case <-time.After(10 * time.Second):
			t.Fatalf("no %v event within 10s", want)
		}
		return store.Doc{}
	}
	a := store.Announcement{Name: "dns-1", Admin: "http://127.0.0.1:9153", Started: clk.Now(), PID: 7}
	key := store.KeyDNSServersPrefix + a.Name
	done := make(chan error, 1)
	actx, stop := context.WithCancel(ctx)
	go func() {
		done <- store.Announce(actx, st, key, a, store.AnnounceOptions{Clock: clk, Every: time.Second, Logger: obs.Discard})
	}()
	d := next(store.Put)
	got, err := store.ParseAnnouncement(d.Value)
	if err != nil || d.Key != key || !reflect.DeepEqual(got, a) {
		t.Fatalf("announcement %s = %+v (%v), want %+v", d.Key, got, err, a)
	}
	clk.Advance(time.Second) // in place: nothing written
	if err := st.Delete(ctx, key, store.Write{Author: "test"}); err != nil {
		t.Fatal(err)
	}
	next(store.Delete)
	clk.Advance(time.Second) // missing: written again
	if d := next(store.Put); d.Version != 3 {
		t.Fatalf("re-announced version %d, want 3 (one put, one delete, one put: the steady heartbeat wrote nothing)", d.Version)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	next(store.Delete)
}
