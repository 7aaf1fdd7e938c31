package failover

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"

	"github.com/veerhq/veer/internal/atomicfile"
)

// Store persists the backup domain a Transport is using, so that the next
// run (the seed's "app launch") starts in BACKUP on it.
//
// Contract: Load returns the saved domain name, or "" when none is saved;
// a Store that cannot read or decode its data returns "" and an error,
// which the Transport logs as a warning and otherwise ignores. Save and
// Clear may do I/O; the Transport calls them off its lock, and only the most
// recent decision is written when two race.
type Store interface {
	Load() (string, error)
	Save(domain string) error
	Clear() error
}

// ErrCorruptStore is wrapped by the error a FileStore's Load returns when
// the file exists but does not hold a valid record.
var ErrCorruptStore = errors.New("failover: corrupt store file")

// maxStoreFile bounds what Load reads.
const maxStoreFile = 4 << 10

// storeVersion is the record format written by FileStore.
const storeVersion = 1

// FileStore returns a Store keeping the backup domain in the file at path,
// as a small JSON record. Save writes atomically: a temporary file in the
// same directory, fsync, rename over path, fsync of the directory; so a
// crash leaves either the old record or the new one. Clear removes the
// file. A missing file means nothing is saved.
func FileStore(path string) *File { return &File{path: path} }

// File is the Store returned by FileStore.
type File struct {
	path string
	mu   sync.Mutex
}

var _ Store = (*File)(nil)

type record struct {
	Version int    `json:"version"`
	Domain  string `json:"domain"`
}

// Load implements Store.
func (f *File) Load() (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fh, err := os.Open(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, maxStoreFile+1))
	if err != nil {
		return "", err
	}
	return decodeRecord(data)
}

// decodeRecord parses a store file. It never panics on any input.
func decodeRecord(data []byte) (string, error) {
	if len(data) > maxStoreFile {
		return "", fmt.Errorf("%w: larger than %d bytes", ErrCorruptStore, maxStoreFile)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var r record
	if err := dec.Decode(&r); err != nil {
		return "", fmt.Errorf("%w: %v", ErrCorruptStore, err)
	}
	if dec.More() {
		return "", fmt.Errorf("%w: trailing data", ErrCorruptStore)
	}
	if r.Version != storeVersion {
		return "", fmt.Errorf("%w: version %d, want %d", ErrCorruptStore, r.Version, storeVersion)
	}
	if err := checkHost(r.Domain); err != nil {
		return "", fmt.Errorf("%w: domain %q: %v", ErrCorruptStore, r.Domain, err)
	}
	return r.Domain, nil
}

func encodeRecord(domain string) ([]byte, error) {
	b, err := json.Marshal(record{Version: storeVersion, Domain: domain})
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Save implements Store.
func (f *File) Save(domain string) error {
	if err := checkHost(domain); err != nil {
		return fmt.Errorf("failover: save %q: %w", domain, err)
	}
	data, err := encodeRecord(domain)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return atomicfile.Write(f.path, data)
}

// Clear implements Store.
func (f *File) Clear() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return atomicfile.Remove(f.path)
}
