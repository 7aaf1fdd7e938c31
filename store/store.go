// Package store holds veer's versioned documents (routing rules, site and
// cluster state, access nodes, criticality tables, limits) behind one small
// interface, Store, with two backends: an embedded one (bbolt in the data
// directory, store/storebolt) for one machine, and etcd (store/storeetcd)
// for several control-plane instances. This package itself depends on
// neither.
//
// Contract. A document is a key (a path such as "routing/table") and an
// opaque value. Every write gives it a new per-key Version (1, 2, 3 …, never
// reused, also across delete and re-create) and a store-wide Revision.
// Writes are optimistic: Write.Expect names the version the writer read
// (Absent: must not exist; 0: unconditional) and a mismatch is ErrConflict.
// Every write appends a Change (author, reason, before, after) to the key's
// history, which serves audit and rollback.
//
// Consumers (gateways, the private DNS, other control instances) read a List
// with its revision and then Watch from the next revision; when a watch cannot
// continue (the revision was compacted, the backend went away) the consumer is
// told with a Reset event and must re-list. Follow does exactly that and hands
// the consumer immutable snapshots.
//
// Failure mode: a backend that cannot be reached returns errors wrapping
// ErrUnavailable (the control plane answers 503); an embedded file that is not
// a valid store is ErrCorrupt at Open, never silently replaced by an empty
// store.
package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sentinel errors; backends wrap them.
var (
	// ErrNotFound: the key does not exist.
	ErrNotFound = errors.New("store: not found")
	// ErrConflict: Write.Expect did not match the key's version.
	ErrConflict = errors.New("store: version conflict")
	// ErrUnavailable: the backend cannot be reached; retry later.
	ErrUnavailable = errors.New("store: backend unavailable")
	// ErrCompacted: a watch asked for a revision the store no longer has;
	// re-list.
	ErrCompacted = errors.New("store: revision compacted")
	// ErrCorrupt: the embedded store file is not a valid store.
	ErrCorrupt = errors.New("store: corrupt data file")
	// ErrInvalid: a key or value breaks the limits below.
	ErrInvalid = errors.New("store: invalid key or value")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store: closed")
)

// Limits on keys and values.
const (
	// MaxKeyLen is the longest key, in bytes.
	MaxKeyLen = 512
	// MaxValueLen is the largest value, in bytes.
	MaxValueLen = 8 << 20
)

// Expectations for Write.Expect besides a positive version.
const (
	// Any writes whatever the current version (the zero value).
	Any int64 = 0
	// Absent requires that the key does not exist.
	Absent int64 = -1
)

// Doc is one document as read.
type Doc struct {
	Key   string
	Value []byte
	// Version counts the key's writes: 1 at creation, +1 on each change.
	Version int64
	// Revision is the store-wide revision of the doc's last write.
	Revision int64
}

// Write describes one change.
type Write struct {
	// Expect is the version the writer read: Any (0) writes regardless,
	// Absent (-1) requires the key not to exist, n > 0 requires version n.
	Expect int64
	// Author and Reason are recorded in the history.
	Author string
	Reason string
	// NoHistory (Put only) leaves the write out of the key's history, and
	// so out of the audit log: for machine-written state that changes
	// every second (a gateway's rollout counts), never for configuration.
	// The version still increases and watchers see the write; the next
	// recorded change's Before is the value it replaced. A Delete is
	// always recorded.
	NoHistory bool
}

// Change is one entry of a key's history.
type Change struct {
	Key      string    `json:"key"`
	Version  int64     `json:"version"`
	Revision int64     `json:"revision"`
	Time     time.Time `json:"time"`
	Author   string    `json:"author,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	Deleted  bool      `json:"deleted,omitempty"`
	// Before is the value this change replaced (nil: none); After the value it
	// wrote (nil when Deleted).
	Before []byte `json:"before,omitempty"`
	After  []byte `json:"after,omitempty"`
}

// EventType says what an Event carries.
type EventType int

// Event types.
const (
	// Put: Doc was written.
	Put EventType = iota + 1
	// Delete: Doc.Key was deleted (Doc.Value nil).
	Delete
	// Reset: the watch cannot continue (Err says why: ErrCompacted,
	// ErrUnavailable, ErrClosed); the consumer must re-list. It is the last
	// event on the channel.
	Reset
)

func (t EventType) String() string {
	switch t {
	case Put:
		return "put"
	case Delete:
		return "delete"
	case Reset:
		return "reset"
	}
	return fmt.Sprintf("EventType(%d)", int(t))
}

// Event is one change seen by a watch.
type Event struct {
	Type EventType
	Doc  Doc
	Err  error
}

// Store is a versioned document store. Implementations are safe for
// concurrent use. Every method honours ctx; errors wrap the sentinels above.
type Store interface {
	// Get returns the key's document or ErrNotFound.
	Get(ctx context.Context, key string) (Doc, error)
	// List returns the documents whose key starts with prefix, in key
	// order, and the store revision they were read at.
	List(ctx context.Context, prefix string) ([]Doc, int64, error)
	// Put writes value under key if w.Expect holds (else ErrConflict) and
	// returns the written document.
	Put(ctx context.Context, key string, value []byte, w Write) (Doc, error)
	// Delete removes key if w.Expect holds; ErrNotFound if it does not
	// exist.
	Delete(ctx context.Context, key string, w Write) error
	// Watch sends, in revision order, every change to keys under prefix
	// made at revision >= from. The channel is closed when ctx ends; a
	// watch that cannot continue sends one Reset event and closes. A
	// consumer that does not keep up may be Reset.
	Watch(ctx context.Context, prefix string, from int64) <-chan Event
	// History returns up to limit changes of keys under prefix, newest
	// first (limit <= 0: all retained).
	History(ctx context.Context, prefix string, limit int) ([]Change, error)
	// Close releases the store; watches end with a Reset (ErrClosed).
	Close() error
}

// CheckKey validates a key: non-empty, at most MaxKeyLen bytes, printable
// ASCII without spaces, no leading "/" and no ".." segment.
func CheckKey(key string) error {
	if key == "" || len(key) > MaxKeyLen {
		return fmt.Errorf("%w: key length %d, want 1..%d", ErrInvalid, len(key), MaxKeyLen)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c <= ' ' || c >= 0x7f {
			return fmt.Errorf("%w: key %q: byte %d is not printable ASCII", ErrInvalid, key, i)
		}
	}
	if key[0] == '/' || strings.Contains("/"+key+"/", "/../") {
		return fmt.Errorf("%w: key %q: leading / or .. segment", ErrInvalid, key)
	}
	return nil
}

// CheckValue validates a value's size.
func CheckValue(v []byte) error {
	if len(v) > MaxValueLen {
		return fmt.Errorf("%w: value of %d bytes, max %d", ErrInvalid, len(v), MaxValueLen)
	}
	return nil
}

// CheckPut is every backend's Put prelude: it validates key and value and
// returns the value to store, a nil value as an empty one (a document that
// exists has a value; only a deleted one has none).
func CheckPut(key string, value []byte) ([]byte, error) {
	if err := CheckKey(key); err != nil {
		return nil, err
	}
	if err := CheckValue(value); err != nil {
		return nil, err
	}
	if value == nil {
		value = []byte{}
	}
	return value, nil
}

// CheckExpect validates w.Expect against the current version cur (0: the
// key does not exist).
func CheckExpect(key string, w Write, cur int64) error {
	switch {
	case w.Expect == Any:
		return nil
	case w.Expect == Absent && cur != 0:
		return fmt.Errorf("%w: %s exists at version %d", ErrConflict, key, cur)
	case w.Expect > 0 && w.Expect != cur:
		return fmt.Errorf("%w: %s is at version %d, not %d", ErrConflict, key, cur, w.Expect)
	case w.Expect < Absent:
		return fmt.Errorf("%w: expect %d", ErrInvalid, w.Expect)
	}
	return nil
}
