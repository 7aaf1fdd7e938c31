package store_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/veerhq/veer/store"
	"github.com/veerhq/veer/store/storebolt"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// resetting wraps a real store; its first watch is cut off with a Reset
// (as a compaction would) after delivering one event.
type resetting struct {
	store.Store
	watches atomic.Int32
	lists   atomic.Int32
}

func (r *resetting) List(ctx context.Context, prefix string) ([]store.Doc, int64, error) {
	r.lists.Add(1)
	return r.Store.List(ctx, prefix)
}

func (r *resetting) Watch(ctx context.Context, prefix string, from int64) <-chan store.Event {
	in := r.Store.Watch(ctx, prefix, from)
	if r.watches.Add(1) > 1 {
		return in
	}
	out := make(chan store.Event, 2)
	go func() {
		defer close(out)
		e, ok := <-in
		if ok {
			out <- e
		}
		out <- store.Event{Type: store.Reset, Err: store.ErrCompacted}
	}()
	return out
}

func TestFollowRelistsAfterReset(t *testing.T) {
	s, err := storebolt.Open(filepath.Join(t.TempDir(), "s.db"), storebolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rs := &resetting{Store: s}
	ctx, cancel := context.WithCancel(context.Background())
	snaps := make(chan *store.Snapshot, 100)
	resets := make(chan error, 10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		store.Follow(ctx, rs, "k/", store.FollowOptions{Backoff: time.Millisecond, OnReset: func(err error) { resets <- err }},
			func(sn *store.Snapshot) { snaps <- sn })
	}()
	<-snaps // the empty first list
	if _, err := s.Put(ctx, "k/a", []byte("1"), store.Write{}); err != nil {
		t.Fatal(err)
	}
	if err := <-resets; !errors.Is(err, store.ErrCompacted) {
		t.Fatalf("OnReset got %v", err)
	}
	last, err := s.Put(ctx, "k/b", []byte("2"), store.Write{})
	if err != nil {
		t.Fatal(err)
	}
	for sn := range snaps {
		if sn.Revision >= last.Revision {
			if len(sn.Docs) != 2 {
				t.Fatalf("after the re-list: %+v", sn.Docs)
			}
			break
		}
	}
	if rs.lists.Load() < 2 {
		t.Fatalf("%d lists: Follow did not re-list after the Reset", rs.lists.Load())
	}
	cancel()
	<-done
}

func FuzzCheckKey(f *testing.F) {
	for _, k := range []string{"routing/table", "", "/a", "a/../b", "a b", "é"} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, k string) {
		if store.CheckKey(k) != nil {
			return
		}
		for i := 0; i < len(k); i++ {
			if k[i] <= ' ' || k[i] >= 0x7f {
				t.Fatalf("accepted %q", k)
			}
		}
		if k[0] == '/' || len(k) > store.MaxKeyLen {
			t.Fatalf("accepted %q", k)
		}
	})
}

// TestCheckPut: the backends' Put prelude refuses a bad key or an oversized
// value with ErrInvalid and stores a nil value as an empty one.
func TestCheckPut(t *testing.T) {
	tests := []struct {
		name    string
		key     string
		value   []byte
		invalid bool
	}{
		{"a document", "routing/table", []byte("x"), false},
		{"nil value", "routing/table", nil, false},
		{"empty key", "", []byte("x"), true},
		{"a .. segment", "a/../b", []byte("x"), true},
		{"value too large", "k", make([]byte, store.MaxValueLen+1), true},
	}
	for _, tt := range tests {
		v, err := store.CheckPut(tt.key, tt.value)
		if got := errors.Is(err, store.ErrInvalid); got != tt.invalid {
			t.Errorf("%s: err %v, want invalid %v", tt.name, err, tt.invalid)
		}
		if !tt.invalid && (v == nil || len(v) != len(tt.value)) {
			t.Errorf("%s: value %q, want %q and not nil", tt.name, v, tt.value)
		}
	}
}
