// Package storebolt is the embedded store.Store: one bbolt file in the data
// directory, for a control plane on one machine (`veer control` with zero
// config). Watches are served from a log of recent revisions kept in the
// file (Options.LogRetain); a watch from an older revision is Reset with
// store.ErrCompacted.
//
// Failure mode: a file that exists but is not a valid veer store (garbage,
// zeroed pages, another program's bbolt file) is refused at Open with
// store.ErrCorrupt naming the file; it is never replaced by an empty store.
// A file locked by another process fails Open after 2 s.
package storebolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/store"
)

// DefaultLogRetain is how many revisions the embedded store keeps for
// Watch; a watch from an older revision is Reset with store.ErrCompacted.
const DefaultLogRetain = 10000

// formatMark identifies a veer store file; a bbolt file without it is not
// ours and is refused.
const formatMark = "veer-store-1"

var (
	bMeta = []byte("meta")
	bDocs = []byte("docs")
	bHist = []byte("hist")
	bLog  = []byte("log")
	kRev  = []byte("rev")
	kFmt  = []byte("format")
	kComp = []byte("compacted")
)

// Options tune the embedded store; the zero value works.
type Options struct {
	// Clock stamps history entries; default clock.Real.
	Clock clock.Clock
	// LogRetain is how many revisions are kept for Watch; default
	// DefaultLogRetain.
	LogRetain int
}

// Store is the embedded store.Store: one bbolt file, one process. Watches are
// served from a log of recent revisions kept in the file.
type Store struct {
	db     *bolt.DB
	clk    clock.Clock
	retain uint64

	mu      sync.Mutex
	subs    map[chan struct{}]struct{}
	closed  bool
	closing chan struct{}
	wg      sync.WaitGroup
}

var _ store.Store = (*Store)(nil)

// Open opens or creates the embedded store file at path. A file that exists
// but is not a valid veer store is refused with store.ErrCorrupt: a control plane
// must never start on an empty store by accident.
func Open(path string, opts Options) (*Store, error) {
	fi, statErr := os.Stat(path)
	existed := statErr == nil && fi.Size() > 0
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, fmt.Errorf("store: %s is locked by another process: %w", path, err)
		}
		if existed {
			return nil, fmt.Errorf("%w: %s: %v (move it away to start empty, or restore a backup)", store.ErrCorrupt, path, err)
		}
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bMeta)
		if meta == nil {
			if existed && hasBuckets(tx) {
				return fmt.Errorf("%w: %s: a bbolt file without veer's format mark", store.ErrCorrupt, path)
			}
			for _, b := range [][]byte{bMeta, bDocs, bHist, bLog} {
				if _, err := tx.CreateBucketIfNotExists(b); err != nil {
					return err
				}
			}
			return tx.Bucket(bMeta).Put(kFmt, []byte(formatMark))
		}
		if f := meta.Get(kFmt); string(f) != formatMark {
			return fmt.Errorf("%w: %s: format %q, want %q", store.ErrCorrupt, path, f, formatMark)
		}
		for _, b := range [][]byte{bDocs, bHist, bLog} {
			if tx.Bucket(b) == nil {
				return fmt.Errorf("%w: %s: bucket %s missing", store.ErrCorrupt, path, b)
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	s := &Store{db: db, clk: clock.Or(opts.Clock), retain: DefaultLogRetain,
		subs: map[chan struct{}]struct{}{}, closing: make(chan struct{})}
	if opts.LogRetain > 0 {
		s.retain = uint64(opts.LogRetain)
	}
	return s, nil
}

func hasBuckets(tx *bolt.Tx) bool {
	found := false
	_ = tx.ForEach(func([]byte, *bolt.Bucket) error { found = true; return nil })
	return found
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// stored is a document's encoding in the docs bucket.
type stored struct {
	Version  int64  `json:"v"`
	Revision int64  `json:"r"`
	Value    []byte `json:"d"`
}

// logEntry is one revision in the log bucket.
type logEntry struct {
	Key     string `json:"k"`
	Deleted bool   `json:"x,omitempty"`
	Version int64  `json:"v"`
	Value   []byte `json:"d,omitempty"`
}

func (s *Store) live() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	return nil
}

func readDoc(tx *bolt.Tx, key string) (stored, bool, error) {
	raw := tx.Bucket(bDocs).Get([]byte(key))
	if raw == nil {
		return stored{}, false, nil
	}
	var d stored
	if err := json.Unmarshal(raw, &d); err != nil {
		return stored{}, false, fmt.Errorf("%w: document %q: %v", store.ErrCorrupt, key, err)
	}
	return d, true, nil
}

// Get implements Store.
func (s *Store) Get(ctx context.Context, key string) (store.Doc, error) {
	if err := s.live(); err != nil {
		return store.Doc{}, err
	}
	var out store.Doc
	err := s.db.View(func(tx *bolt.Tx) error {
		d, ok, err := readDoc(tx, key)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: %s", store.ErrNotFound, key)
		}
		out = store.Doc{Key: key, Value: d.Value, Version: d.Version, Revision: d.Revision}
		return nil
	})
	return out, err
}

// List implements Store.
func (s *Store) List(ctx context.Context, prefix string) ([]store.Doc, int64, error) {
	if err := s.live(); err != nil {
		return nil, 0, err
	}
	var out []store.Doc
	var rev int64
	err := s.db.View(func(tx *bolt.Tx) error {
		rev = int64(revOf(tx))
		c := tx.Bucket(bDocs).Cursor()
		p := []byte(prefix)
		for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
			var d stored
			if err := json.Unmarshal(v, &d); err != nil {
				return fmt.Errorf("%w: document %q: %v", store.ErrCorrupt, k, err)
			}
			out = append(out, store.Doc{Key: string(k), Value: d.Value, Version: d.Version, Revision: d.Revision})
		}
		return nil
	})
	return out, rev, err
}

func revOf(tx *bolt.Tx) uint64 {
	if v := tx.Bucket(bMeta).Get(kRev); len(v) == 8 {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// Put implements Store.
func (s *Store) Put(ctx context.Context, key string, value []byte, w store.Write) (store.Doc, error) {
	value, err := store.CheckPut(key, value)
	if err != nil {
		return store.Doc{}, err
	}
	var next *stored
	err = s.write(key, w, func(stored, bool) (*stored, error) {
		next = &stored{Value: value}
		return next, nil
	})
	if err != nil {
		return store.Doc{}, err
	}
	return store.Doc{Key: key, Value: value, Version: next.Version, Revision: next.Revision}, nil
}

// Delete implements Store.
func (s *Store) Delete(ctx context.Context, key string, w store.Write) error {
	if err := store.CheckKey(key); err != nil {
		return err
	}
	return s.write(key, w, func(cur stored, exists bool) (*stored, error) {
		if !exists {
			return nil, fmt.Errorf("%w: %s", store.ErrNotFound, key)
		}
		return nil, nil
	})
}

// write runs one change in a transaction: next == nil deletes.
func (s *Store) write(key string, w store.Write, change func(cur stored, exists bool) (*stored, error)) error {
	if err := s.live(); err != nil {
		return err
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		cur, exists, err := readDoc(tx, key)
		if err != nil {
			return err
		}
		var curV int64
		if exists {
			curV = cur.Version
		}
		if err := store.CheckExpect(key, w, curV); err != nil {
			return err
		}
		next, err := change(cur, exists)
		if err != nil {
			return err
		}
		rev := revOf(tx) + 1
		version := max(curV, lastVersion(tx, key)) + 1 // a NoHistory write is in the document, not the history
		ch := store.Change{Key: key, Version: version, Revision: int64(rev), Time: s.clk.Now().UTC(),
			Author: w.Author, Reason: w.Reason}
		if exists {
			ch.Before = cur.Value
		}
		le := logEntry{Key: key, Version: version}
		if next == nil {
			ch.Deleted, le.Deleted = true, true
			if err := tx.Bucket(bDocs).Delete([]byte(key)); err != nil {
				return err
			}
		} else {
			next.Version, next.Revision = version, int64(rev)
			ch.After, le.Value = next.Value, next.Value
			if err := putJSON(tx.Bucket(bDocs), []byte(key), next); err != nil {
				return err
			}
		}
		if !w.NoHistory || next == nil {
			if err := putJSON(tx.Bucket(bHist), histKey(key, version), ch); err != nil {
				return err
			}
		}
		if err := putJSON(tx.Bucket(bLog), u64(rev), le); err != nil {
			return err
		}
		if err := tx.Bucket(bMeta).Put(kRev, u64(rev)); err != nil {
			return err
		}
		return s.trim(tx, rev)
	})
	if err != nil {
		return err
	}
	s.notify()
	return nil
}

// trim drops log entries older than the retention and records the
// compaction point.
func (s *Store) trim(tx *bolt.Tx, rev uint64) error {
	if rev <= s.retain {
		return nil
	}
	floor := rev - s.retain
	lb := tx.Bucket(bLog)
	c := lb.Cursor()
	for k, _ := c.First(); k != nil && binary.BigEndian.Uint64(k) <= floor; k, _ = c.First() {
		if err := lb.Delete(k); err != nil {
			return err
		}
	}
	return tx.Bucket(bMeta).Put(kComp, u64(floor))
}

func histKey(key string, version int64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(key), 0), uint64(version))
}

func lastVersion(tx *bolt.Tx, key string) int64 {
	c := tx.Bucket(bHist).Cursor()
	k, _ := c.Seek(histKey(key, 1<<62))
	if k == nil {
		k, _ = c.Last()
	} else {
		k, _ = c.Prev()
	}
	p := append([]byte(key), 0)
	if k == nil || !bytes.HasPrefix(k, p) || len(k) != len(p)+8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(k[len(p):]))
}

func putJSON(b *bolt.Bucket, k []byte, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(k, raw)
}

// History implements Store.
func (s *Store) History(ctx context.Context, prefix string, limit int) ([]store.Change, error) {
	if err := s.live(); err != nil {
		return nil, err
	}
	var out []store.Change
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bHist).Cursor()
		p := []byte(prefix)
		for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
			var ch store.Change
			if err := json.Unmarshal(v, &ch); err != nil {
				return fmt.Errorf("%w: history %q: %v", store.ErrCorrupt, k, err)
			}
			out = append(out, ch)
		}
		return nil
	})
	sortNewestFirst(out)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, err
}

// Close implements Store.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.closing)
	s.mu.Unlock()
	s.wg.Wait()
	return s.db.Close()
}
