package failover

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestFileStore(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "failover.json")
	s := FileStore(path)
	if d, err := s.Load(); d != "" || err != nil {
		t.Fatalf("missing file: %q, %v; want nothing saved", d, err)
	}
	if err := s.Clear(); err != nil {
		t.Fatalf("clear without a file: %v", err)
	}
	for _, d := range []string{"dc1.example.com", "dc2.example.com:8443", "[::1]:443"} {
		if err := s.Save(d); err != nil {
			t.Fatal(err)
		}
		if got, err := FileStore(path).Load(); got != d || err != nil {
			t.Fatalf("load after save %q: %q, %v", d, got, err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("dir holds %v (%v), want only the record (no temp files left)", entries, err)
	}
	if err := s.Save("https://bad/"); err == nil {
		t.Fatal("saving a URL succeeded, want an error")
	}
	if err := s.Clear(); err != nil {
		t.Fatal(err)
	}
	if d, err := s.Load(); d != "" || err != nil {
		t.Fatalf("after clear: %q, %v", d, err)
	}
	// a save into a missing directory fails and leaves nothing behind
	if err := FileStore(filepath.Join(dir, "no", "such", "f.json")).Save("dc1"); err == nil {
		t.Fatal("save into a missing directory succeeded")
	}
}

func TestDecodeRecord(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for in, want := range map[string]string{
		`{"version":1,"domain":"dc1.example.com"}`:                                   "dc1.example.com",
		`{"version":1,"domain":"dc1.example.com:8443"}` + "\n":                       "dc1.example.com:8443",
		`{"version":2,"domain":"dc1.example.com"}`:                                   "dc1.example.com",
		`{"version":2,"history":[{"network":"lte/C4","at":"2026-01-01T00:00:00Z"}]}`: "",
	} {
		if got, err := decodeRecord([]byte(in)); got.Domain != want || err != nil {
			t.Errorf("decode %q: %+v, %v; want %q", in, got, err, want)
		}
	}
	r, err := decodeRecord([]byte(`{"version":2,"domain":"dc1","history":[{"network":"lte/C4","at":"2026-01-01T00:00:00Z"}]}`))
	if err != nil || len(r.History) != 1 || r.History[0] != (NetworkFailure{"lte/C4", at}) {
		t.Errorf("history: %+v, %v", r, err)
	}
	for _, in := range []string{
		``, `{}`, `null`, `[]`, `{"version":3,"domain":"a"}`, `{"version":1,"domain":""}`, `{"version":2}`,
		`{"version":1,"domain":"a/b"}`, `{"version":1,"domain":"a","x":1}`, `{"version":1,"domain":"a"} {}`,
		`{"version":1,"domain":"a","history":[{"network":"x","at":"2026-01-01T00:00:00Z"}]}`,
		`{"version":2,"history":[{"network":"","at":"2026-01-01T00:00:00Z"}]}`,
		`{"version":2,"history":[{"network":"x"}]}`,
		string(make([]byte, maxStoreFile+1)),
	} {
		if got, err := decodeRecord([]byte(in)); err == nil || !errors.Is(err, ErrCorruptStore) || got.Domain != "" || got.History != nil {
			t.Errorf("decode %q: %+v, %v; want ErrCorruptStore", in, got, err)
		}
	}
}

// TestFileStoreHistory: the history and the domain are kept side by side;
// Clear removes the domain only, and the file goes when both are empty.
func TestFileStoreHistory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.json")
	s := FileStore(path)
	h := []NetworkFailure{{"wifi/home", time.Unix(100, 0).UTC()}, {"lte/C4", time.Unix(200, 0).UTC()}}
	if err := s.Save("dc1"); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveHistory(h); err != nil {
		t.Fatal(err)
	}
	if err := s.Clear(); err != nil {
		t.Fatal(err)
	}
	if d, err := s.Load(); d != "" || err != nil {
		t.Fatalf("after Clear: %q, %v", d, err)
	}
	got, err := s.LoadHistory()
	if err != nil || !slices.Equal(got, h) {
		t.Fatalf("history %v, %v; want %v", got, err, h)
	}
	if err := s.Save("dc2"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.LoadHistory(); !slices.Equal(got, h) {
		t.Fatalf("Save lost the history: %v", got)
	}
	if err := s.SaveHistory(nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Clear(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("empty record left a file: %v", err)
	}
}

// FuzzDecodeRecord: decoding never panics, only accepts valid hosts, and
// what it accepts survives a round trip through the encoder.
func FuzzDecodeRecord(f *testing.F) {
	f.Add([]byte(`{"version":1,"domain":"dc1.example.com"}`))
	f.Add([]byte(`{"version":1,"domain":"[::1]:443"}`))
	f.Add([]byte(`{"version":1,"domain":"a:99999"}`))
	f.Add([]byte(`{"version":2,"domain":"a","history":[{"network":"lte","at":"2026-01-01T00:00:00Z"}]}`))
	f.Add([]byte("\x00\xff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := decodeRecord(data)
		if err != nil {
			if r.Domain != "" || r.History != nil || !errors.Is(err, ErrCorruptStore) {
				t.Fatalf("error %v with record %+v", err, r)
			}
			return
		}
		if r.Domain != "" {
			if err := checkHost(r.Domain); err != nil {
				t.Fatalf("accepted invalid host %q: %v", r.Domain, err)
			}
		}
		enc, err := encodeRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := decodeRecord(enc)
		if err != nil || r2.Domain != r.Domain || len(r2.History) != len(r.History) {
			t.Fatalf("round trip %+v -> %+v, %v", r, r2, err)
		}
		for i := range r.History {
			if r2.History[i].Network != r.History[i].Network || !r2.History[i].At.Equal(r.History[i].At) {
				t.Fatalf("round trip %+v -> %+v", r, r2)
			}
		}
	})
}
