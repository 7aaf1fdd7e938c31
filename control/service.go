package control

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/store"
	"github.com/veerhq/veer/store/storebolt"
	"github.com/veerhq/veer/store/storeetcd"
)

// ErrNotReady: no routing table has been loaded yet.
var ErrNotReady = errors.New("control: no routing table yet")

// Service is one control-plane instance: it follows the store, compiles
// the routing documents into a Snapshot, and serves the public API
// (routing, scheduling) and the admin API.
type Service struct {
	cfg        Config
	st         store.Store
	ownStore   bool
	key        ed25519.PrivateKey
	tokens     *tokens
	adminToken bool // generated on this start
	clk        clock.Clock
	log        *slog.Logger
	m          *metrics
	onApply    func(int64, *Snapshot)
	extraDocs  map[string]func([]byte) error
	ui         func(http.Handler, store.Store) http.Handler
	recent     recent
	parsed     parseCache
	trusted    []netip.Prefix
	rollEvery  time.Duration

	snap   atomic.Pointer[Snapshot]
	access atomic.Pointer[accessSnap]
	docs   atomic.Pointer[store.Snapshot]
	ready  chan struct{}
	once   sync.Once

	appliedMu  sync.Mutex
	appliedRev int64         // the store revision of the last snapshot applied
	appliedCh  chan struct{} // closed and replaced at each apply

	mu      sync.Mutex
	cancel  context.CancelFunc
	done    chan struct{}
	servers []func() error
}

// New opens the store (embedded in DataDir unless Etcd is configured, or
// opts.Store) and loads or creates the signing key and the admin token.
// A corrupt embedded store is an error naming the file.
func New(cfg Config, opts Options) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, config.Field("data_dir", "%v", err)
	}
	s := &Service{cfg: cfg, clk: clock.Or(opts.Clock), log: obs.LoggerOr(opts.Logger), ready: make(chan struct{}), appliedCh: make(chan struct{}),
		rollEvery: cmp.Or(opts.RolloutInterval, DefaultRolloutInterval)}
	s.m = newMetrics(opts.Registerer)
	s.extraDocs = opts.Documents
	s.ui = opts.UI
	for _, p := range cfg.TrustedProxies {
		s.trusted = append(s.trusted, netip.MustParsePrefix(p).Masked()) // validated
	}
	var err error
	if s.key, _, err = loadOrCreateSigningKey(cfg.SigningKeyFile); err != nil {
		return nil, err
	}
	admin, created, err := loadOrCreateAdminToken(cfg.AdminTokenFile)
	if err != nil {
		return nil, err
	}
	s.adminToken = created
	s.tokens = newTokens(admin, cfg.Tokens)
	switch {
	case opts.Store != nil:
		s.st = opts.Store
	case len(cfg.Etcd.Endpoints) > 0:
		st, err := storeetcd.New(cfg.Etcd, storeetcd.Options{Clock: opts.Clock})
		if err != nil {
			return nil, err
		}
		s.st, s.ownStore = st, true
	default:
		st, err := storebolt.Open(filepath.Join(cfg.DataDir, "store.db"), storebolt.Options{Clock: opts.Clock})
		if err != nil {
			return nil, err
		}
		s.st, s.ownStore = st, true
	}
	return s, nil
}

// SetOnApply registers a function told, after each store change was
// applied, the store revision and the routing Snapshot then current (nil
// without a table); for measurements and tests. Call it before Start.
func (s *Service) SetOnApply(f func(rev int64, snap *Snapshot)) { s.onApply = f }

// Store is the service's store.
func (s *Service) Store() store.Store { return s.st }

// PublicKey is the key answers are signed with (routing.Config.PublicKeys
// takes PublicKeyString of it).
func (s *Service) PublicKey() ed25519.PublicKey { return s.key.Public().(ed25519.PublicKey) }

// AdminTokenFile returns the admin token's path and whether this start
// created it.
func (s *Service) AdminTokenFile() (string, bool) { return s.cfg.AdminTokenFile, s.adminToken }

// Snapshot is the current compiled rule set, nil before the first table.
func (s *Service) Snapshot() *Snapshot { return s.snap.Load() }

// Ready is closed once the first snapshot of the store has been applied.
func (s *Service) Ready() <-chan struct{} { return s.ready }

// Applied is the store revision of the last snapshot applied: answers
// reflect every write up to it.
func (s *Service) Applied() int64 {
	s.appliedMu.Lock()
	defer s.appliedMu.Unlock()
	return s.appliedRev
}

// WaitApplied returns once a store revision of at least rev has been
// applied (the revision an admin write or playbook answered), so that
// what is asked next sees that write; or ctx's error, naming both
// revisions.
func (s *Service) WaitApplied(ctx context.Context, rev int64) error {
	for {
		s.appliedMu.Lock()
		cur, ch := s.appliedRev, s.appliedCh
		s.appliedMu.Unlock()
		if cur >= rev {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("control: revision %d applied, not %d: %w", s.Applied(), rev, ctx.Err())
		}
	}
}

// markApplied records rev as applied and wakes WaitApplied.
func (s *Service) markApplied(rev int64) {
	s.appliedMu.Lock()
	defer s.appliedMu.Unlock()
	if rev > s.appliedRev {
		s.appliedRev = rev
	}
	close(s.appliedCh)
	s.appliedCh = make(chan struct{})
}

// follow keeps the snapshots in step with the store until ctx ends.
func (s *Service) follow(ctx context.Context) {
	store.Follow(ctx, s.st, "", store.FollowOptions{Clock: s.clk, OnReset: func(err error) {
		s.m.resets.Inc()
		s.log.Warn("control: store watch reset; re-listing, answers continue from the last snapshot", "err", err)
	}}, s.apply)
}

// apply compiles the documents of one store snapshot.
func (s *Service) apply(sn *store.Snapshot) {
	s.docs.Store(sn)
	defer func() {
		s.markApplied(sn.Revision)
		s.once.Do(func() { close(s.ready) })
		if s.onApply != nil {
			s.onApply(sn.Revision, s.snap.Load())
		}
	}()
	if err := s.applyAccess(sn); err != nil {
		s.m.snapshots.WithLabelValues("invalid").Inc()
		s.log.Error("control: invalid access document in the store; keeping the previous one", "err", err)
	}
	in, err := parseRouting(sn, &s.parsed)
	if err != nil {
		s.m.snapshots.WithLabelValues("invalid").Inc()
		s.log.Error("control: invalid routing document in the store; keeping the previous snapshot", "err", err)
		return
	}
	if in.table == nil {
		s.snap.Store(nil)
		return
	}
	if cur := s.snap.Load(); cur != nil && cur.version == in.version {
		return
	}
	var b *base
	if cur := s.snap.Load(); cur != nil && cur.baseVersion == in.baseVersion {
		b = cur.base // only state or emergency changed: keep the ID indexes
	} else {
		b = compileBase(in.table, in.lists)
		b.baseVersion = in.baseVersion
	}
	snap := b.overlay(in.state, in.emergency, in.version, s.key)
	s.snap.Store(snap)
	s.m.snapshots.WithLabelValues("applied").Inc()
	s.m.applied.SetToCurrentTime()
}

// Close stops the listeners and the store watch, and closes a store the
// service opened.
func (s *Service) Close() error {
	s.mu.Lock()
	cancel, done, servers := s.cancel, s.done, s.servers
	s.cancel, s.servers = nil, nil
	s.mu.Unlock()
	var errs []error
	for _, stop := range servers {
		errs = append(errs, stop())
	}
	if cancel != nil {
		cancel()
		<-done
	}
	if s.ownStore {
		errs = append(errs, s.st.Close())
	}
	return errors.Join(errs...)
}

func (s *Service) String() string { return fmt.Sprintf("control(%s)", s.cfg.DataDir) }

// routingInputs are the parsed routing documents of one store snapshot.
type routingInputs struct {
	table     *Table
	state     *State
	emergency *Emergency
	lists     map[string]*Whitelist
	// version is the latest revision among the routing documents.
	version int64
	// baseVersion identifies the table and whitelists: the latest revision
	// among them and their number (a deletion lowers the number, an
	// addition raises the revision).
	baseVersion baseID
}

type baseID struct {
	rev int64
	n   int
}

// parseCache keeps decoded documents by key and revision, so that a change
// to one document does not decode the others again.
type parseCache struct {
	mu sync.Mutex
	m  map[string]parsedDoc
}

type parsedDoc struct {
	rev int64
	v   any
}

// get decodes d into a new T, or returns the value decoded for the same
// revision before.
func cached[T any](c *parseCache, d store.Doc) (*T, error) {
	if c != nil {
		c.mu.Lock()
		p, ok := c.m[d.Key]
		c.mu.Unlock()
		if v, isT := p.v.(*T); ok && isT && p.rev == d.Revision {
			return v, nil
		}
	}
	v := new(T)
	if err := config.Parse(d.Value, d.Key, v); err != nil {
		return nil, err
	}
	if c != nil {
		c.mu.Lock()
		if c.m == nil {
			c.m = map[string]parsedDoc{}
		}
		c.m[d.Key] = parsedDoc{d.Revision, v}
		c.mu.Unlock()
	}
	return v, nil
}

// parseRouting decodes the routing documents (table nil when there is
// none).
func parseRouting(sn *store.Snapshot, c *parseCache) (routingInputs, error) {
	in := routingInputs{state: new(State), emergency: new(Emergency), lists: map[string]*Whitelist{}}
	for key, d := range sn.Docs {
		if !strings.HasPrefix(key, "routing/") {
			continue
		}
		in.version = max(in.version, d.Revision)
		var err error
		switch {
		case key == KeyTable:
			in.baseVersion = baseID{max(in.baseVersion.rev, d.Revision), in.baseVersion.n + 1}
			in.table, err = cached[Table](c, d)
		case key == KeyState:
			in.state, err = cached[State](c, d)
		case key == KeyEmergency:
			in.emergency, err = cached[Emergency](c, d)
		case strings.HasPrefix(key, KeyWhitelists):
			in.baseVersion = baseID{max(in.baseVersion.rev, d.Revision), in.baseVersion.n + 1}
			in.lists[strings.TrimPrefix(key, KeyWhitelists)], err = cached[Whitelist](c, d)
		}
		if err != nil {
			return in, err
		}
	}
	return in, nil
}
