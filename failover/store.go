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

// HistoryStore is a Store that also keeps the per-network history of
// primary failures (NetworkFailure) of a NetworkAware policy, persisted with
// the backup domain. FileStore is one. Contract as Store's: LoadHistory
// returns nil and an error for data it cannot read; SaveHistory replaces
// the history and leaves the domain as it is (and Save and Clear leave the
// history).
type HistoryStore interface {
	Store
	LoadHistory() ([]NetworkFailure, error)
	SaveHistory(h []NetworkFailure) error
}

// ErrCorruptStore is wrapped by the error a FileStore's Load returns when
// the file exists but does not hold a valid record.
var ErrCorruptStore = errors.New("failover: corrupt store file")

// maxStoreFile bounds what Load reads: the domain and up to
// maxHistorySize history entries.
const maxStoreFile = 256 << 10

// storeVersion is the record format written by FileStore; version 1 (a
// domain, no history) is still read.
const storeVersion = 2

// FileStore returns a HistoryStore keeping the backup domain and the
// per-network history in the file at path, as a small JSON record. Writes
// are atomic: a temporary file in the same directory, fsync, rename over
// path, fsync of the directory; so a crash leaves either the old record or
// the new one. Clear removes the domain (and the file when no history is
// kept). A missing file means nothing is saved.
func FileStore(path string) *File { return &File{path: path} }

// File is the Store returned by FileStore.
type File struct {
	path string
	mu   sync.Mutex
}

var _ HistoryStore = (*File)(nil)

type record struct {
	Version int              `json:"version"`
	Domain  string           `json:"domain,omitempty"`
	History []NetworkFailure `json:"history,omitempty"`
}

// Load implements Store.
func (f *File) Load() (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, err := f.read()
	return r.Domain, err
}

// LoadHistory implements HistoryStore.
func (f *File) LoadHistory() ([]NetworkFailure, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, err := f.read()
	return r.History, err
}

// read returns the record in the file (the zero record if there is none).
func (f *File) read() (record, error) {
	fh, err := os.Open(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		return record{}, nil
	}
	if err != nil {
		return record{}, err
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, maxStoreFile+1))
	if err != nil {
		return record{}, err
	}
	return decodeRecord(data)
}

// decodeRecord parses a store file. It never panics on any input.
func decodeRecord(data []byte) (record, error) {
	if len(data) > maxStoreFile {
		return record{}, fmt.Errorf("%w: larger than %d bytes", ErrCorruptStore, maxStoreFile)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var r record
	if err := dec.Decode(&r); err != nil {
		return record{}, fmt.Errorf("%w: %v", ErrCorruptStore, err)
	}
	if dec.More() {
		return record{}, fmt.Errorf("%w: trailing data", ErrCorruptStore)
	}
	switch {
	case r.Version == 1 && len(r.History) == 0:
	case r.Version != storeVersion:
		return record{}, fmt.Errorf("%w: version %d, want %d", ErrCorruptStore, r.Version, storeVersion)
	}
	if r.Domain == "" && (r.Version == 1 || len(r.History) == 0) {
		return record{}, fmt.Errorf("%w: no domain", ErrCorruptStore)
	}
	if r.Domain != "" {
		if err := checkHost(r.Domain); err != nil {
			return record{}, fmt.Errorf("%w: domain %q: %v", ErrCorruptStore, r.Domain, err)
		}
	}
	if len(r.History) > maxHistorySize {
		return record{}, fmt.Errorf("%w: %d history entries, at most %d", ErrCorruptStore, len(r.History), maxHistorySize)
	}
	for i, h := range r.History {
		if h.Network == "" || len(h.Network) > 256 || h.At.IsZero() {
			return record{}, fmt.Errorf("%w: history[%d]: want a network name (1-256 bytes) and a time", ErrCorruptStore, i)
		}
	}
	return r, nil
}

func encodeRecord(r record) ([]byte, error) {
	r.Version = storeVersion
	b, err := json.Marshal(r)
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
	f.mu.Lock()
	defer f.mu.Unlock()
	r, _ := f.read() // an unreadable history is lost, the domain is not
	r.Domain = domain
	return f.write(r)
}

// SaveHistory implements HistoryStore.
func (f *File) SaveHistory(h []NetworkFailure) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, _ := f.read()
	r.History = h
	return f.write(r)
}

// Clear implements Store.
func (f *File) Clear() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, _ := f.read()
	r.Domain = ""
	return f.write(r)
}

// write replaces the file by r, or removes it when r is empty.
func (f *File) write(r record) error {
	if r.Domain == "" && len(r.History) == 0 {
		return f.remove()
	}
	data, err := encodeRecord(r)
	if err != nil {
		return err
	}
	return atomicfile.Write(f.path, data)
}

func (f *File) remove() error { return atomicfile.Remove(f.path) }
