package limit

import (
	"context"
	"hash/maphash"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/tier"
)

// entry is the state of one key.
type entry struct {
	tat      atomic.Int64 // GCRA theoretical arrival time, ns since Limiter.base
	inflight atomic.Int64
	last     atomic.Int64 // last use, ns since Limiter.base
}

type resolved struct {
	t, tau int64 // emission interval and tolerance (burst·t), ns; t = 0: no rate
	conc   int64
}

func resolve(l Limits) resolved {
	var r resolved
	if l.Rate > 0 {
		t := float64(time.Second) / l.Rate
		if t < 1 {
			t = 1
		}
		r.t = int64(t)
		r.tau = r.t * int64(l.burst())
		if r.tau/int64(l.burst()) != r.t || r.tau < 0 {
			r.tau = math.MaxInt64 / 4
		}
	}
	r.conc = int64(l.Concurrency)
	return r
}

const nShards = 32

type shard struct {
	mu sync.RWMutex
	m  map[string]*entry
	_  [32]byte
}

// table holds the keys of one dimension; it survives config reloads.
type table struct {
	name     string
	shards   [nShards]shard
	count    atomic.Int64
	overflow entry
	lastGC   atomic.Int64
	keys     prometheus.Gauge
	over     prometheus.Counter
	evicted  prometheus.Counter
	// rejRate and rejConc are veer_limit_rejected_total by tier
	// (tierIndex: unset and the four tiers).
	rejRate [int(tier.CriticalPlus) + 1]prometheus.Counter
	rejConc [int(tier.CriticalPlus) + 1]prometheus.Counter
}

type dimSnap struct {
	tab  *table
	def  resolved
	over map[string]resolved
	skip bool // no limits at all
}

type snapshot struct {
	maxReq, maxResp int64
	dims            []dimSnap
	maxKeys         int64
	idle            int64
	concRA          time.Duration
}

// Options are the non-config dependencies of a Limiter.
type Options struct {
	// Clock drives Admit; default clock.Real.
	Clock clock.Clock
	// Registerer receives the metrics; default prometheus.DefaultRegisterer.
	Registerer prometheus.Registerer
}

// Limiter is the local multi-dimensional limiter. Safe for concurrent use.
type Limiter struct {
	clk  clock.Clock
	base time.Time
	seed maphash.Seed
	snap atomic.Pointer[snapshot]
	m    *metrics

	mu     sync.Mutex // serialises Apply
	tables map[string]*table
}

var _ Admitter = (*Limiter)(nil)

// epoch: key state is measured from an hour before the limiter's creation,
// so that AllowAt with slightly earlier times still sees fresh buckets.
const epoch = time.Hour

// New returns a Limiter with cfg. An invalid cfg is an error.
func New(cfg Config, opts Options) (*Limiter, error) {
	l := &Limiter{clk: clock.Or(opts.Clock), seed: maphash.MakeSeed(), tables: map[string]*table{}}
	l.base = l.clk.Now().Add(-epoch)
	l.m = newMetrics(opts.Registerer)
	if err := l.Apply(cfg); err != nil {
		return nil, err
	}
	return l, nil
}

// Apply replaces the config, every field of it, keeping the state of keys
// in dimensions whose names stay. An invalid cfg is an error naming the field
// and changes nothing. It is the reload function for config/watch:
//
//	watch.File(path, watch.Options{}, l.Apply)
func (l *Limiter) Apply(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.withDefaults()
	l.mu.Lock()
	defer l.mu.Unlock()
	s := &snapshot{maxKeys: int64(cfg.MaxKeys), idle: int64(cfg.IdleTimeout), concRA: cfg.ConcurrencyRetryAfter,
		maxReq: cfg.MaxRequestBody, maxResp: cfg.MaxResponseBody}
	tables := map[string]*table{}
	for _, d := range cfg.Dimensions {
		t := l.tables[d.Name]
		if t == nil {
			t = l.m.newTable(d.Name)
		}
		tables[d.Name] = t
		ds := dimSnap{tab: t, def: resolve(d.Default)}
		if len(d.Overrides) > 0 {
			ds.over = make(map[string]resolved, len(d.Overrides))
			for k, o := range d.Overrides {
				ds.over[k] = resolve(o)
			}
		}
		ds.skip = ds.def == (resolved{}) && len(ds.over) == 0
		s.dims = append(s.dims, ds)
	}
	for name, t := range l.tables {
		if tables[name] == nil {
			t.keys.Set(0)
		}
	}
	l.tables = tables
	l.snap.Store(s)
	return nil
}

// Admit decides at the clock's current time. A rejection is counted under
// the tier ctx carries (tier.FromContext; "unset" without one).
func (l *Limiter) Admit(ctx context.Context, keys []string) Result {
	// Since reads only the monotonic clock: half the cost of Now.
	return l.allow(int64(l.clk.Since(l.base)), keys, tier.FromContext(ctx))
}

// AdmitAs is Admit for a request of tier t, whatever ctx carries: a
// rejection is counted under t. It does not allocate (AdmitHTTPAs uses it
// rather than a context value).
func (l *Limiter) AdmitAs(keys []string, t tier.Tier) Result {
	return l.allow(int64(l.clk.Since(l.base)), keys, t)
}

// AllowAt decides for a request arriving at now. It does not allocate. A
// rejection is counted under the tier "unset".
func (l *Limiter) AllowAt(now time.Time, keys []string) Result {
	return l.allow(int64(now.Sub(l.base)), keys, tier.Unset)
}

func (l *Limiter) allow(n int64, keys []string, t tier.Tier) Result {
	s := l.snap.Load()
	var res Result
	var rated [MaxDimensions]*entry
	var ratedT [MaxDimensions]int64
	nr := 0
	for i := range s.dims {
		if i >= len(keys) {
			break
		}
		d := &s.dims[i]
		key := keys[i]
		if key == "" || d.skip {
			continue
		}
		r := &d.def
		if d.over != nil {
			if o, ok := d.over[key]; ok {
				r = &o
			}
		}
		if r.t == 0 && r.conc == 0 {
			continue
		}
		e, sh := d.tab.acquire(l, s, key, n)
		if r.t > 0 {
			if ok, ra := admitRate(e, n, r); !ok {
				release(sh)
				rollback(&res.Permit, rated[:nr], ratedT[:nr])
				d.tab.rejRate[tierIndex(t)].Inc()
				return Result{Dimension: d.tab.name, Key: key, Reason: Rate, RetryAfter: time.Duration(ra)}
			}
			rated[nr], ratedT[nr] = e, r.t
			nr++
		}
		if r.conc > 0 {
			if e.inflight.Add(1) > r.conc {
				e.inflight.Add(-1)
				if r.t > 0 {
					e.tat.Add(-r.t) // this dimension's own rate admission
					nr--
				}
				release(sh)
				rollback(&res.Permit, rated[:nr], ratedT[:nr])
				d.tab.rejConc[tierIndex(t)].Inc()
				return Result{Dimension: d.tab.name, Key: key, Reason: Concurrency, RetryAfter: s.concRA}
			}
			res.Permit.conc[res.Permit.n] = e
			res.Permit.n++
		}
		if n-e.last.Load() > int64(time.Second) {
			e.last.Store(n)
		}
		release(sh)
	}
	res.Allowed = true
	return res
}

// admitRate is GCRA: admit if the new theoretical arrival time is within
// tau of now; otherwise report how long until it would be.
func admitRate(e *entry, now int64, r *resolved) (bool, int64) {
	for {
		tat := e.tat.Load()
		nt := max(tat, now) + r.t
		if d := nt - now; d > r.tau {
			return false, d - r.tau
		}
		if e.tat.CompareAndSwap(tat, nt) {
			return true, 0
		}
	}
}

// rollback undoes the admissions of the dimensions before a rejecting one.
func rollback(p *Permit, rated []*entry, t []int64) {
	for i, e := range rated {
		e.tat.Add(-t[i])
	}
	p.Release()
}

// acquire returns the entry of key with its shard read-locked (unlock
// with release), so that an eviction, which takes the write lock, cannot
// remove an entry while a request is being decided on it. Past the cap it
// returns the overflow entry and a nil shard.
func (t *table) acquire(l *Limiter, s *snapshot, key string, now int64) (*entry, *shard) {
	sh := &t.shards[maphash.String(l.seed, key)%nShards]
	for {
		sh.mu.RLock()
		if e := sh.m[key]; e != nil {
			return e, sh
		}
		sh.mu.RUnlock()
		if !t.insert(sh, s, key, now) {
			t.over.Inc()
			return &t.overflow, nil
		}
	}
}

func release(sh *shard) {
	if sh != nil {
		sh.mu.RUnlock()
	}
}

// insert adds a fresh entry for key unless one exists; it reports false
// when the dimension is full even after evicting idle keys.
func (t *table) insert(sh *shard, s *snapshot, key string, now int64) bool {
	sh.mu.Lock()
	if sh.m[key] != nil {
		sh.mu.Unlock()
		return true
	}
	if t.count.Load() >= s.maxKeys {
		t.evictShard(sh, now, s.idle)
	}
	if t.count.Load() >= s.maxKeys {
		sh.mu.Unlock()
		if last := t.lastGC.Load(); now-last > s.idle/2 && t.lastGC.CompareAndSwap(last, now) {
			t.sweep(now, s.idle)
		}
		if t.count.Load() >= s.maxKeys {
			return false
		}
		sh.mu.Lock()
		if sh.m[key] != nil {
			sh.mu.Unlock()
			return true
		}
	}
	if sh.m == nil {
		sh.m = map[string]*entry{}
	}
	e := &entry{}
	e.last.Store(now)
	sh.m[strings.Clone(key)] = e
	t.keys.Set(float64(t.count.Add(1)))
	sh.mu.Unlock()
	return true
}

// evictShard drops the shard's idle keys whose state equals a fresh key's:
// bucket full (tat ≤ now) and nothing in flight. Called with sh.mu held.
func (t *table) evictShard(sh *shard, now, idle int64) {
	for k, e := range sh.m {
		if e.inflight.Load() == 0 && e.tat.Load() <= now && now-e.last.Load() >= idle {
			delete(sh.m, k)
			t.keys.Set(float64(t.count.Add(-1)))
			t.evicted.Inc()
		}
	}
}

func (t *table) sweep(now, idle int64) {
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		t.evictShard(sh, now, idle)
		sh.mu.Unlock()
	}
}

// Sweep evicts idle keys of every dimension at now; a service may call it
// periodically (Admit also evicts on demand when a dimension is full).
func (l *Limiter) Sweep(now time.Time) {
	n := int64(now.Sub(l.base))
	s := l.snap.Load()
	for i := range s.dims {
		s.dims[i].tab.sweep(n, s.idle)
	}
}

// Keys returns the number of keys kept in the named dimension.
func (l *Limiter) Keys(dimension string) int {
	for _, d := range l.snap.Load().dims {
		if d.tab.name == dimension {
			return int(d.tab.count.Load())
		}
	}
	return 0
}

// MaxRequestBody is Config.MaxRequestBody in force (for BodyLimitFunc).
func (l *Limiter) MaxRequestBody() int64 { return l.snap.Load().maxReq }

// MaxResponseBody is Config.MaxResponseBody in force (for ResponseLimit).
func (l *Limiter) MaxResponseBody() int64 { return l.snap.Load().maxResp }

// Dimensions returns the configured dimension names in order.
func (l *Limiter) Dimensions() []string {
	s := l.snap.Load()
	out := make([]string, len(s.dims))
	for i, d := range s.dims {
		out[i] = d.tab.name
	}
	return out
}
