package cache

import (
	"cmp"
	"container/list"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/obs"
)

// Loader fetches the current value of key from the dependency.
type Loader[V any] func(ctx context.Context, key string) (V, error)

// The defaults of a zero Config field.
const (
	DefaultTTL          = time.Minute
	DefaultMaxStale     = 24 * time.Hour
	DefaultErrorBackoff = 5 * time.Second
	DefaultLoadTimeout  = 10 * time.Second
	DefaultMaxEntries   = 10000
)

// Config tunes a Cache: what a config file can say. The zero value works; a
// zero field takes its default, an invalid one is an error of New naming the
// field.
type Config struct {
	// TTL: a value is fresh this long after it was loaded; default
	// DefaultTTL (1m).
	TTL time.Duration `yaml:"ttl" json:"ttl"`
	// MaxStale: on a load error, a value up to this old (since it was
	// loaded) is served; not shorter than TTL; default DefaultMaxStale
	// (24h), or TTL when TTL is longer.
	MaxStale time.Duration `yaml:"max_stale" json:"max_stale"`
	// ErrorBackoff: after a failed load, the key is not loaded again for
	// this long while a stale value can be served; default
	// DefaultErrorBackoff (5s).
	ErrorBackoff time.Duration `yaml:"error_backoff" json:"error_backoff"`
	// LoadTimeout bounds one load; default DefaultLoadTimeout (10s).
	LoadTimeout time.Duration `yaml:"load_timeout" json:"load_timeout"`
	// MaxEntries bounds the cache; default DefaultMaxEntries (10000).
	MaxEntries int `yaml:"max_entries" json:"max_entries"`
}

// Validate reports invalid fields.
func (c *Config) Validate() error {
	errs := []error{
		config.NotNegative("ttl", c.TTL),
		config.NotNegative("max_stale", c.MaxStale),
		config.NotNegative("error_backoff", c.ErrorBackoff),
		config.NotNegative("load_timeout", c.LoadTimeout),
		config.NotNegative("max_entries", c.MaxEntries),
	}
	if ttl := cmp.Or(c.TTL, DefaultTTL); c.MaxStale > 0 && c.MaxStale < ttl {
		errs = append(errs, config.Field("max_stale", "must not be shorter than ttl (%v)", ttl))
	}
	return errors.Join(errs...)
}

// withDefaults fills the zero fields of a valid Config with their defaults.
func (c Config) withDefaults() Config {
	c.TTL = cmp.Or(c.TTL, DefaultTTL)
	c.MaxStale = cmp.Or(c.MaxStale, max(DefaultMaxStale, c.TTL))
	c.ErrorBackoff = cmp.Or(c.ErrorBackoff, DefaultErrorBackoff)
	c.LoadTimeout = cmp.Or(c.LoadTimeout, DefaultLoadTimeout)
	c.MaxEntries = cmp.Or(c.MaxEntries, DefaultMaxEntries)
	return c
}

// Options are the non-config dependencies of a Cache.
type Options struct {
	// Name labels metrics; default obs.DefaultName ("default").
	Name string
	// Clock tells the age of values; default clock.Real.
	Clock clock.Clock
	// Publish, if set, is called by Invalidate to tell other instances
	// (cacheredis.Bus.Publish). Errors are counted, not returned.
	Publish func(ctx context.Context, key string) error
	// Registerer receives the metrics; default prometheus.DefaultRegisterer.
	Registerer prometheus.Registerer
}

// Status says how a Get was answered.
type Status uint8

// The statuses.
const (
	Fresh  Status = iota // a fresh value from the cache
	Loaded               // a value just loaded
	Stale                // an old value served because the load failed
)

func (s Status) String() string {
	return [...]string{"fresh", "loaded", "stale"}[s]
}

type entry[V any] struct {
	key         string
	val         V
	loadedAt    time.Time
	has         bool      // val is set
	expired     bool      // forced stale by ExpireAll
	failedUntil time.Time // no reload before this after an error
	elem        *list.Element
}

type flight[V any] struct {
	done chan struct{}
	val  V
	err  error
}

// Cache is a bounded stale-on-error cache. Safe for concurrent use.
type Cache[V any] struct {
	cfg  Config
	load Loader[V]
	clk  clock.Clock
	pub  func(context.Context, string) error
	m    metrics

	mu      sync.Mutex
	entries map[string]*entry[V]
	lru     *list.List // front: most recently used
	flights map[string]*flight[V]
}

// ErrNoLoader is New's error for a nil Loader.
var ErrNoLoader = errors.New("cache: nil Loader")

// New returns a Cache loading through load (required). An invalid cfg is an
// error naming the field (a *config.FieldError); a zero field takes its
// default.
func New[V any](cfg Config, load Loader[V], opts Options) (*Cache[V], error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if load == nil {
		return nil, ErrNoLoader
	}
	name := obs.NameOr(opts.Name)
	return &Cache[V]{
		cfg: cfg.withDefaults(), load: load, clk: clock.Or(opts.Clock), pub: opts.Publish,
		m:       newMetrics(opts.Registerer, name),
		entries: map[string]*entry[V]{}, lru: list.New(), flights: map[string]*flight[V]{},
	}, nil
}

// ErrNoValue wraps a load error when there was no value young enough to
// serve instead.
var ErrNoValue = errors.New("cache: no value to serve")

// Get returns the value of key: fresh from the cache, loaded, or stale when
// the load failed and a value younger than MaxStale exists. err is non-nil
// only when no value can be served; it wraps ErrNoValue and the loader's
// error.
func (c *Cache[V]) Get(ctx context.Context, key string) (V, Status, error) {
	now := c.clk.Now()
	c.mu.Lock()
	e := c.entries[key]
	if e != nil && e.has {
		c.lru.MoveToFront(e.elem)
		age := now.Sub(e.loadedAt)
		if !e.expired && age < c.cfg.TTL {
			v := e.val
			c.mu.Unlock()
			c.m.fresh.Inc()
			return v, Fresh, nil
		}
		if now.Before(e.failedUntil) && age <= c.cfg.MaxStale {
			// The dependency failed moments ago: do not ask it again yet.
			v := e.val
			c.mu.Unlock()
			c.m.stale.Inc()
			return v, Stale, nil
		}
	}
	f := c.flights[key]
	if f == nil {
		f = &flight[V]{done: make(chan struct{})}
		c.flights[key] = f
		go c.run(ctx, key, f)
	}
	c.mu.Unlock()

	select {
	case <-f.done:
	case <-ctx.Done():
		var zero V
		return zero, Loaded, ctx.Err()
	}
	if f.err == nil {
		c.m.loaded.Inc()
		return f.val, Loaded, nil
	}
	now = c.clk.Now()
	c.mu.Lock()
	e = c.entries[key]
	if e != nil && e.has && now.Sub(e.loadedAt) <= c.cfg.MaxStale {
		v := e.val
		c.mu.Unlock()
		c.m.stale.Inc()
		return v, Stale, nil
	}
	c.mu.Unlock()
	c.m.errors.Inc()
	var zero V
	return zero, Loaded, errors.Join(ErrNoValue, f.err)
}

// run loads key for every waiter of f. The load is detached from the first
// caller's cancellation and bounded by LoadTimeout.
func (c *Cache[V]) run(ctx context.Context, key string, f *flight[V]) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.LoadTimeout)
	defer cancel()
	v, err := c.load(ctx, key)
	now := c.clk.Now()
	c.mu.Lock()
	// An invalidation during the load removed the flight: its value may
	// predate the invalidation, so the waiters get it but the cache does not.
	current := c.flights[key] == f
	if current {
		delete(c.flights, key)
	}
	f.val, f.err = v, err
	e := c.entries[key]
	switch {
	case !current:
	case err != nil:
		if e != nil {
			e.failedUntil = now.Add(c.cfg.ErrorBackoff)
		}
	default:
		if e == nil {
			e = &entry[V]{key: key}
			e.elem = c.lru.PushFront(e)
			c.entries[key] = e
			c.evictLocked()
		}
		e.val, e.has, e.loadedAt, e.expired, e.failedUntil = v, true, now, false, time.Time{}
	}
	c.m.entries.Set(float64(len(c.entries)))
	c.mu.Unlock()
	close(f.done)
}

func (c *Cache[V]) evictLocked() {
	for len(c.entries) > c.cfg.MaxEntries {
		back := c.lru.Back()
		e := back.Value.(*entry[V])
		c.lru.Remove(back)
		delete(c.entries, e.key)
		c.m.evictions.Inc()
	}
}

// InvalidateLocal drops key from this cache only (the value is wrong: it is
// not served stale either).
func (c *Cache[V]) InvalidateLocal(key string) {
	c.mu.Lock()
	if e := c.entries[key]; e != nil {
		c.lru.Remove(e.elem)
		delete(c.entries, key)
	}
	delete(c.flights, key)
	c.m.entries.Set(float64(len(c.entries)))
	c.mu.Unlock()
}

// Invalidate drops key here and publishes the invalidation to the other
// instances through Options.Publish.
func (c *Cache[V]) Invalidate(ctx context.Context, key string) {
	c.InvalidateLocal(key)
	if c.pub != nil {
		if err := c.pub(ctx, key); err != nil {
			c.m.pubErrors.Inc()
		}
	}
}

// ExpireAll marks every value stale: each is reloaded on its next Get, and
// still served if that load fails. Used after missing invalidations (a
// pub/sub reconnect).
func (c *Cache[V]) ExpireAll() {
	c.mu.Lock()
	for _, e := range c.entries {
		e.expired = true
	}
	c.mu.Unlock()
}

// Len returns the number of keys held.
func (c *Cache[V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

type metrics struct {
	fresh, loaded, stale, errors prometheus.Counter
	evictions, pubErrors         prometheus.Counter
	entries                      prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer, name string) metrics {
	req := obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "veer_cache_requests_total",
		Help: "Gets by result: fresh, loaded, stale (served on a dependency error), error.",
	}, []string{"cache", "result"}))
	return metrics{
		fresh:  req.WithLabelValues(name, "fresh"),
		loaded: req.WithLabelValues(name, "loaded"),
		stale:  req.WithLabelValues(name, "stale"),
		errors: req.WithLabelValues(name, "error"),
		evictions: obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "veer_cache_evictions_total",
			Help: "Values evicted to stay under max_entries.",
		}, []string{"cache"})).WithLabelValues(name),
		pubErrors: obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "veer_cache_publish_errors_total",
			Help: "Invalidations that could not be published.",
		}, []string{"cache"})).WithLabelValues(name),
		entries: obs.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "veer_cache_entries",
			Help: "Values held.",
		}, []string{"cache"})).WithLabelValues(name),
	}
}
