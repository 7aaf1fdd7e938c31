// Package storeetcd is the etcd backend of store.Store, for several
// control-plane instances sharing one configuration. It keeps etcd's client
// (gRPC, protobuf) out of the store package's import graph.
//
// Layout under Config.Prefix (default "/veer/"): "d/<key>" holds a document
// (its per-key version and value), "h/<key>\x00<version>" one history entry
// per write. A write is one etcd transaction guarded on the document's mod
// revision and on the new history entry not existing, so concurrent writers
// from several instances never both win. Watches use etcd's watch from a
// revision; a compacted revision is a Reset with store.ErrCompacted. While
// etcd is unreachable, reads and writes fail with store.ErrUnavailable and
// watches wait; etcd's client resumes them from their last revision when it
// is back.
package storeetcd

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/store"
)

// Defaults.
const (
	DefaultPrefix         = "/veer/"
	DefaultDialTimeout    = 2 * time.Second
	DefaultRequestTimeout = 2 * time.Second
	maxPutAttempts        = 16
)

// Config is what a config file says about the etcd backend.
type Config struct {
	// Endpoints are etcd client URLs (required), e.g. http://10.0.0.1:2379.
	Endpoints []string `json:"endpoints" yaml:"endpoints"`
	// Prefix namespaces veer's keys; default DefaultPrefix.
	Prefix string `json:"prefix,omitempty" yaml:"prefix,omitempty"`
	// DialTimeout bounds connecting; default DefaultDialTimeout.
	DialTimeout time.Duration `json:"dial_timeout,omitempty" yaml:"dial_timeout,omitempty"`
	// RequestTimeout bounds each read or write; default
	// DefaultRequestTimeout. Past it the call fails with
	// store.ErrUnavailable.
	RequestTimeout time.Duration `json:"request_timeout,omitempty" yaml:"request_timeout,omitempty"`
}

// FieldError names the Config field a Validate error is about (a parent
// config maps it onto its own field path and file line; this package sits
// beside config in the layers and does not import it).
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Err: fmt.Errorf(format, args...)}
}

// Validate names the bad field (a *FieldError).
func (c Config) Validate() error {
	if len(c.Endpoints) == 0 {
		return fieldErr("endpoints", "at least one etcd endpoint is required")
	}
	for i, e := range c.Endpoints {
		if !strings.Contains(e, "://") {
			return fieldErr(fmt.Sprintf("endpoints[%d]", i), "%q: want a URL such as http://127.0.0.1:2379", e)
		}
	}
	if c.DialTimeout < 0 {
		return fieldErr("dial_timeout", "negative")
	}
	if c.RequestTimeout < 0 {
		return fieldErr("request_timeout", "negative")
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	return c
}

// Options are run-time wiring; the zero value works.
type Options struct {
	// Clock stamps history entries; default clock.Real.
	Clock clock.Clock
}

// Store is the etcd-backed store.Store.
type Store struct {
	cfg Config
	cli *clientv3.Client
	clk clock.Clock
}

var _ store.Store = (*Store)(nil)

// New connects to etcd. It does not wait for etcd to answer: a control
// plane starts (and serves its last snapshot) while etcd is down.
func New(cfg Config, opts Options) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: cfg.DialTimeout,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("storeetcd: %w", err)
	}
	return &Store{cfg: cfg, cli: cli, clk: clock.Or(opts.Clock)}, nil
}

// Close implements store.Store.
func (s *Store) Close() error { return s.cli.Close() }

type stored struct {
	Version int64  `json:"v"`
	Value   []byte `json:"d"`
}

func (s *Store) dkey(k string) string { return s.cfg.Prefix + "d/" + k }
func (s *Store) hkey(k string, v int64) string {
	return s.cfg.Prefix + "h/" + k + "\x00" + hex.EncodeToString(binary.BigEndian.AppendUint64(nil, uint64(v)))
}

// unavailable maps a client error to the store's sentinels.
func unavailable(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return err
	}
	return fmt.Errorf("%w: etcd: %v", store.ErrUnavailable, err)
}

func (s *Store) op(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.cfg.RequestTimeout)
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, key string) (store.Doc, error) {
	c, cancel := s.op(ctx)
	defer cancel()
	r, err := s.cli.Get(c, s.dkey(key))
	if err != nil {
		return store.Doc{}, unavailable(ctx, err)
	}
	if len(r.Kvs) == 0 {
		return store.Doc{}, fmt.Errorf("%w: %s", store.ErrNotFound, key)
	}
	var d stored
	if err := json.Unmarshal(r.Kvs[0].Value, &d); err != nil {
		return store.Doc{}, fmt.Errorf("%w: document %q: %v", store.ErrCorrupt, key, err)
	}
	return store.Doc{Key: key, Value: d.Value, Version: d.Version, Revision: r.Kvs[0].ModRevision}, nil
}

// List implements store.Store.
func (s *Store) List(ctx context.Context, prefix string) ([]store.Doc, int64, error) {
	c, cancel := s.op(ctx)
	defer cancel()
	r, err := s.cli.Get(c, s.dkey(prefix), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, 0, unavailable(ctx, err)
	}
	out := make([]store.Doc, 0, len(r.Kvs))
	for _, kv := range r.Kvs {
		var d stored
		if err := json.Unmarshal(kv.Value, &d); err != nil {
			return nil, 0, fmt.Errorf("%w: document %q: %v", store.ErrCorrupt, kv.Key, err)
		}
		out = append(out, store.Doc{Key: strings.TrimPrefix(string(kv.Key), s.dkey("")), Value: d.Value,
			Version: d.Version, Revision: kv.ModRevision})
	}
	return out, r.Header.Revision, nil
}

// Put implements store.Store.
func (s *Store) Put(ctx context.Context, key string, value []byte, w store.Write) (store.Doc, error) {
	value, err := store.CheckPut(key, value)
	if err != nil {
		return store.Doc{}, err
	}
	return s.write(ctx, key, value, w)
}

// Delete implements store.Store.
func (s *Store) Delete(ctx context.Context, key string, w store.Write) error {
	if err := store.CheckKey(key); err != nil {
		return err
	}
	_, err := s.write(ctx, key, nil, w)
	return err
}

// write puts value (nil: deletes) in one guarded transaction, retrying a
// lost race only when the writer expected Any version.
func (s *Store) write(ctx context.Context, key string, value []byte, w store.Write) (store.Doc, error) {
	for range maxPutAttempts {
		c, cancel := s.op(ctx)
		doc, retry, err := s.try(c, key, value, w)
		cancel()
		if err != nil {
			if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrCorrupt) {
				return store.Doc{}, err
			}
			return store.Doc{}, unavailable(ctx, err)
		}
		if !retry {
			return doc, nil
		}
		if w.Expect != store.Any {
			return store.Doc{}, fmt.Errorf("%w: %s changed concurrently", store.ErrConflict, key)
		}
	}
	return store.Doc{}, fmt.Errorf("%w: %s: too many concurrent writers", store.ErrConflict, key)
}

func (s *Store) try(ctx context.Context, key string, value []byte, w store.Write) (store.Doc, bool, error) {
	r, err := s.cli.Get(ctx, s.dkey(key))
	if err != nil {
		return store.Doc{}, false, err
	}
	var cur stored
	var modRev int64
	exists := len(r.Kvs) > 0
	if exists {
		if err := json.Unmarshal(r.Kvs[0].Value, &cur); err != nil {
			return store.Doc{}, false, fmt.Errorf("%w: document %q: %v", store.ErrCorrupt, key, err)
		}
		modRev = r.Kvs[0].ModRevision
	}
	if err := store.CheckExpect(key, w, cur.Version); err != nil {
		return store.Doc{}, false, err
	}
	if value == nil && !exists {
		return store.Doc{}, false, fmt.Errorf("%w: %s", store.ErrNotFound, key)
	}
	version := cur.Version + 1
	if !exists {
		last, err := s.lastVersion(ctx, key)
		if err != nil {
			return store.Doc{}, false, err
		}
		version = last + 1
	}
	ch := store.Change{Key: key, Version: version, Time: s.clk.Now().UTC(), Author: w.Author, Reason: w.Reason,
		After: value, Deleted: value == nil}
	if exists {
		ch.Before = cur.Value
	}
	hist, err := json.Marshal(ch)
	if err != nil {
		return store.Doc{}, false, err
	}
	var main clientv3.Op
	if value == nil {
		main = clientv3.OpDelete(s.dkey(key))
	} else {
		raw, err := json.Marshal(stored{Version: version, Value: value})
		if err != nil {
			return store.Doc{}, false, err
		}
		main = clientv3.OpPut(s.dkey(key), string(raw))
	}
	hk := s.hkey(key, version)
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(s.dkey(key)), "=", modRev)}
	ops := []clientv3.Op{main}
	if !w.NoHistory || value == nil {
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(hk), "=", 0))
		ops = append(ops, clientv3.OpPut(hk, string(hist)))
	}
	t, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return store.Doc{}, false, err
	}
	if !t.Succeeded {
		return store.Doc{}, true, nil
	}
	return store.Doc{Key: key, Value: value, Version: version, Revision: t.Header.Revision}, false, nil
}

func (s *Store) lastVersion(ctx context.Context, key string) (int64, error) {
	p := s.cfg.Prefix + "h/" + key + "\x00"
	r, err := s.cli.Get(ctx, p, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend),
		clientv3.WithLimit(1), clientv3.WithKeysOnly())
	if err != nil || len(r.Kvs) == 0 {
		return 0, err
	}
	b, err := hex.DecodeString(strings.TrimPrefix(string(r.Kvs[0].Key), p))
	if err != nil || len(b) != 8 {
		return 0, fmt.Errorf("%w: history key %q", store.ErrCorrupt, r.Kvs[0].Key)
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}

// History implements store.Store.
func (s *Store) History(ctx context.Context, prefix string, limit int) ([]store.Change, error) {
	c, cancel := s.op(ctx)
	defer cancel()
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortDescend)}
	if limit > 0 {
		opts = append(opts, clientv3.WithLimit(int64(limit)))
	}
	r, err := s.cli.Get(c, s.cfg.Prefix+"h/"+prefix, opts...)
	if err != nil {
		return nil, unavailable(ctx, err)
	}
	out := make([]store.Change, 0, len(r.Kvs))
	for _, kv := range r.Kvs {
		var ch store.Change
		if err := json.Unmarshal(kv.Value, &ch); err != nil {
			return nil, fmt.Errorf("%w: history %q: %v", store.ErrCorrupt, kv.Key, err)
		}
		ch.Revision = kv.ModRevision
		out = append(out, ch)
	}
	return out, nil
}
