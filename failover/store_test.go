package failover

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
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
	for in, want := range map[string]string{
		`{"version":1,"domain":"dc1.example.com"}`:             "dc1.example.com",
		`{"version":1,"domain":"dc1.example.com:8443"}` + "\n": "dc1.example.com:8443",
	} {
		if got, err := decodeRecord([]byte(in)); got != want || err != nil {
			t.Errorf("decode %q: %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{
		``, `{}`, `null`, `[]`, `{"version":2,"domain":"a"}`, `{"version":1,"domain":""}`,
		`{"version":1,"domain":"a/b"}`, `{"version":1,"domain":"a","x":1}`, `{"version":1,"domain":"a"} {}`,
		string(make([]byte, maxStoreFile+1)),
	} {
		if got, err := decodeRecord([]byte(in)); err == nil || !errors.Is(err, ErrCorruptStore) || got != "" {
			t.Errorf("decode %q: %q, %v; want ErrCorruptStore", in, got, err)
		}
	}
}

// FuzzDecodeRecord: decoding never panics, only accepts valid hosts, and
// what it accepts survives a round trip through the encoder.
func FuzzDecodeRecord(f *testing.F) {
	f.Add([]byte(`{"version":1,"domain":"dc1.example.com"}`))
	f.Add([]byte(`{"version":1,"domain":"[::1]:443"}`))
	f.Add([]byte(`{"version":1,"domain":"a:99999"}`))
	f.Add([]byte("\x00\xff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := decodeRecord(data)
		if err != nil {
			if d != "" || !errors.Is(err, ErrCorruptStore) {
				t.Fatalf("error %v with domain %q", err, d)
			}
			return
		}
		if err := checkHost(d); err != nil {
			t.Fatalf("accepted invalid host %q: %v", d, err)
		}
		enc, err := encodeRecord(d)
		if err != nil {
			t.Fatal(err)
		}
		if d2, err := decodeRecord(enc); d2 != d || err != nil {
			t.Fatalf("round trip %q -> %q, %v", d, d2, err)
		}
	})
}
