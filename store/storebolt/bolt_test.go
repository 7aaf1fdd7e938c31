package storebolt_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/veerhq/veer/store"
	"github.com/veerhq/veer/store/storebolt"
	"github.com/veerhq/veer/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func openBolt(t *testing.T) store.Store {
	s, err := storebolt.Open(filepath.Join(t.TempDir(), "veer.db"), storebolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestBoltContract(t *testing.T) { storetest.Run(t, openBolt) }

func TestBoltReopenKeepsEverything(t *testing.T) {
	path := filepath.Join(t.TempDir(), "veer.db")
	s, err := storebolt.Open(path, storebolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.Put(ctx, "k", []byte("v"), store.Write{}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = storebolt.Open(path, storebolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d, err := s.Get(ctx, "k")
	if err != nil || string(d.Value) != "v" || d.Version != 1 {
		t.Fatalf("after reopen: %+v %v", d, err)
	}
	if d2, err := s.Put(ctx, "k2", nil, store.Write{}); err != nil || d2.Revision != 2 {
		t.Fatalf("revision after reopen: %+v %v, want 2", d2, err)
	}
}

func TestBoltCorruptFileRefused(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, []byte("this is not a bbolt file, it is a text file of some length...."), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := storebolt.Open(garbage, storebolt.Options{}); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("garbage file: %v, want ErrCorrupt", err)
	}
	// A valid store whose first pages are overwritten.
	path := filepath.Join(dir, "veer.db")
	s, err := storebolt.Open(path, storebolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(context.Background(), "k", []byte("v"), store.Write{}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 8192), 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := storebolt.Open(path, storebolt.Options{}); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("zeroed meta pages: %v, want ErrCorrupt", err)
	}
}

func TestBoltWatchCompacted(t *testing.T) {
	s, err := storebolt.Open(filepath.Join(t.TempDir(), "veer.db"), storebolt.Options{LogRetain: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for range 6 {
		if _, err := s.Put(ctx, "k", []byte("v"), store.Write{}); err != nil {
			t.Fatal(err)
		}
	}
	e := <-s.Watch(ctx, "", 1)
	if e.Type != store.Reset || !errors.Is(e.Err, store.ErrCompacted) {
		t.Fatalf("watch from a trimmed revision: %+v, want Reset ErrCompacted", e)
	}
	e = <-s.Watch(ctx, "", 4)
	if e.Type != store.Put || e.Doc.Revision != 4 {
		t.Fatalf("watch from a kept revision: %+v", e)
	}
}

func TestBoltCloseResetsWatches(t *testing.T) {
	s, err := storebolt.Open(filepath.Join(t.TempDir(), "veer.db"), storebolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ch := s.Watch(context.Background(), "", 1)
	s.Close()
	e := <-ch
	if e.Type != store.Reset || !errors.Is(e.Err, store.ErrClosed) {
		t.Fatalf("after Close: %+v", e)
	}
	if _, ok := <-ch; ok {
		t.Fatal("channel not closed after Reset")
	}
}
