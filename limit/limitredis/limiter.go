package limitredis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/limit"
	"github.com/veerhq/veer/obs"
)

// Config of a shared limiter. The zero value of every field but Limits
// works.
type Config struct {
	// Limits shared by all instances (the whole fleet's limits).
	Limits limit.Config `yaml:"limits" json:"limits"`
	// Instances sharing the limits; the local fallback enforces
	// Limits ÷ Instances. Default 1.
	Instances int `yaml:"instances" json:"instances"`
	// Prefix of the Redis keys; default "veer:limit:".
	Prefix string `yaml:"prefix" json:"prefix"`
	// Timeout of one Redis decision; default 100ms.
	Timeout time.Duration `yaml:"timeout" json:"timeout"`
	// LeaseTTL: a concurrency slot of a crashed instance comes back after
	// this long; default 30s.
	LeaseTTL time.Duration `yaml:"lease_ttl" json:"lease_ttl"`
	// ProbeInterval: how often Redis is probed while in fallback; default
	// 500ms.
	ProbeInterval time.Duration `yaml:"probe_interval" json:"probe_interval"`
}

// Validate reports invalid fields.
func (c *Config) Validate() error {
	var errs []error
	errs = append(errs, config.In("limits", c.Limits.Validate()))
	if c.Instances < 0 || c.Instances > 100000 {
		errs = append(errs, config.Field("instances", "must be in [0, 100000]"))
	}
	if c.Timeout < 0 {
		errs = append(errs, config.Field("timeout", "must not be negative"))
	}
	if c.LeaseTTL < 0 || (c.LeaseTTL > 0 && c.LeaseTTL < 30*time.Millisecond) {
		errs = append(errs, config.Field("lease_ttl", "must be at least 30ms"))
	}
	if c.ProbeInterval < 0 {
		errs = append(errs, config.Field("probe_interval", "must not be negative"))
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	if c.Instances <= 0 {
		c.Instances = 1
	}
	if c.Prefix == "" {
		c.Prefix = "veer:limit:"
	}
	if c.Timeout <= 0 {
		c.Timeout = 100 * time.Millisecond
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = 30 * time.Second
	}
	if c.ProbeInterval <= 0 {
		c.ProbeInterval = 500 * time.Millisecond
	}
	if c.Limits.ConcurrencyRetryAfter <= 0 {
		c.Limits.ConcurrencyRetryAfter = time.Second
	}
	return c
}

// Options are the non-config dependencies.
type Options struct {
	// Clock drives the probe and lease renewal; default clock.Real.
	Clock clock.Clock
	// Registerer receives the metrics; default prometheus.DefaultRegisterer.
	Registerer prometheus.Registerer
	// Logger receives fallback and recovery; default slog.Default().
	Logger *slog.Logger
	// OnFallback, if set, is called with true on each switch to local
	// limits and with false on each return to Redis. It must not block.
	OnFallback func(fallback bool)
}

// Limiter is a limit.Admitter backed by Redis with a local fallback.
type Limiter struct {
	cfg   Config
	rdb   redis.UniversalClient
	local *limit.Limiter
	log   *slog.Logger
	onFB  func(bool)
	clk   clock.Clock
	id    string
	seq   atomic.Uint64
	m     metrics

	fallback atomic.Bool

	// rprefix[i], cprefix[i]: the Redis key of dimension i's key k is
	// rprefix[i]+k (rate) or cprefix[i]+k (concurrency); see redisPrefixes.
	rprefix, cprefix []string

	mu     sync.Mutex
	leases map[string][]string // lease id -> concurrency keys

	bg background
}

var _ limit.Admitter = (*Limiter)(nil)

// ErrNoClient is returned by New when it is given no Redis client.
var ErrNoClient = errors.New("limitredis: nil Redis client")

// New returns a Limiter using rdb and starts its probe/renewal goroutine;
// isNil reports a nil client, also a typed nil pointer in the interface.
func isNil(rdb redis.UniversalClient) bool {
	switch c := rdb.(type) {
	case nil:
		return true
	case *redis.Client:
		return c == nil
	case *redis.ClusterClient:
		return c == nil
	case *redis.Ring:
		return c == nil
	}
	return false
}

// Close stops it.
func New(cfg Config, rdb redis.UniversalClient, opts Options) (*Limiter, error) {
	if isNil(rdb) {
		return nil, ErrNoClient
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	local, err := limit.New(cfg.Limits.Scale(cfg.Instances), limit.Options{Clock: opts.Clock, Registerer: opts.Registerer})
	if err != nil {
		return nil, err
	}
	var idb [8]byte
	_, _ = rand.Read(idb[:])
	l := &Limiter{
		cfg: cfg, rdb: rdb, local: local, log: obs.LoggerOr(opts.Logger), clk: clock.Or(opts.Clock),
		id: hex.EncodeToString(idb[:]), m: newMetrics(opts.Registerer), onFB: opts.OnFallback,
		leases: map[string][]string{},
	}
	l.rprefix, l.cprefix = redisPrefixes(cfg.Prefix, cfg.Limits.Dimensions)
	l.m.state.Set(0)
	l.startBackground()
	return l, nil
}

// InFallback reports whether decisions are local now.
func (l *Limiter) InFallback() bool { return l.fallback.Load() }

// Admit decides for one request (see limit.Admitter).
func (l *Limiter) Admit(ctx context.Context, keys []string) limit.Result {
	if l.fallback.Load() {
		return l.local.Admit(ctx, keys)
	}
	start := time.Now()
	res, err := l.admitRedis(ctx, keys)
	l.m.latency.Observe(time.Since(start).Seconds())
	if err != nil {
		if ctx.Err() != nil {
			// The caller gave up; that says nothing about Redis.
			return l.local.Admit(ctx, keys)
		}
		l.m.errors.Inc()
		l.enterFallback(err)
		return l.local.Admit(ctx, keys)
	}
	return res
}

func (l *Limiter) enterFallback(err error) {
	if l.fallback.CompareAndSwap(false, true) {
		l.m.state.Set(1)
		l.m.fallbacks.Inc()
		l.log.Warn("limitredis: Redis unreachable; deciding locally with limits ÷ instances", "instances", l.cfg.Instances, "err", err)
		if l.onFB != nil {
			l.onFB(true)
		}
	}
}

func (l *Limiter) admitRedis(ctx context.Context, keys []string) (limit.Result, error) {
	return l.admitRedisAt(ctx, keys, "")
}

// request is one decision's script call.
type request struct {
	keys  []string // GCRA keys, then lease sets
	args  []any
	ckeys []string // the lease sets
	lease string   // lease id, "" without concurrency limits
}

// prepare builds the script call deciding keys at Redis's TIME, or at now
// (ns since the Unix epoch, decimal) when a test gives it. ok is false when
// no dimension limits the request.
func (l *Limiter) prepare(keys []string, now string) (req request, ok bool) {
	dims := l.cfg.Limits.Dimensions
	var rkeys []string
	args := make([]any, 5, 5+3*len(dims))
	var cargs []any
	for i, d := range dims {
		if i >= len(keys) || keys[i] == "" {
			continue
		}
		lim := d.Default
		if o, ok := d.Overrides[keys[i]]; ok {
			lim = o
		}
		if lim.Rate > 0 {
			t := 1e9 / lim.Rate
			burst := lim.Burst
			if burst <= 0 {
				burst = max(1, int(math.Ceil(lim.Rate)))
			}
			rkeys = append(rkeys, l.rprefix[i]+keys[i])
			args = append(args, strconv.FormatFloat(t, 'g', -1, 64), strconv.FormatFloat(t*float64(burst), 'g', -1, 64), i)
		}
		if lim.Concurrency > 0 {
			req.ckeys = append(req.ckeys, l.cprefix[i]+keys[i])
			cargs = append(cargs, lim.Concurrency, i)
		}
	}
	if len(rkeys) == 0 && len(req.ckeys) == 0 {
		return req, false
	}
	if len(req.ckeys) > 0 {
		req.lease = l.id + ":" + strconv.FormatUint(l.seq.Add(1), 36)
	}
	args[0], args[1], args[2], args[3], args[4] = len(rkeys), len(req.ckeys), req.lease, l.cfg.LeaseTTL.Microseconds(), now
	req.args = append(args, cargs...)
	req.keys = append(rkeys, req.ckeys...)
	return req, true
}

func (l *Limiter) admitRedisAt(ctx context.Context, keys []string, now string) (limit.Result, error) {
	dims := l.cfg.Limits.Dimensions
	req, ok := l.prepare(keys, now)
	if !ok {
		return limit.Result{Allowed: true}, nil
	}
	lease, ckeys := req.lease, req.ckeys
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	v, err := admitScript.Run(ctx, l.rdb, req.keys, req.args...).Int64Slice()
	if err != nil {
		return limit.Result{}, err
	}
	if len(v) != 3 {
		return limit.Result{}, errors.New("limitredis: unexpected script reply")
	}
	if v[0] == 1 {
		if h := testHookAdmitted; h != nil {
			h(v[2])
		}
		var p limit.Permit
		if lease != "" {
			l.mu.Lock()
			l.leases[lease] = ckeys
			l.mu.Unlock()
			p = p.WithRelease(func() { l.release(lease) })
		}
		return limit.Result{Allowed: true, Permit: p}, nil
	}
	dim := int(v[1])
	res := limit.Result{Dimension: dims[dim].Name, Key: keys[dim], Reason: limit.Rate, RetryAfter: time.Duration(v[2])}
	if v[2] < 0 {
		res.Reason = limit.Concurrency
		res.RetryAfter = l.cfg.Limits.ConcurrencyRetryAfter
	}
	l.m.rejected.WithLabelValues(res.Dimension, res.Reason.String()).Inc()
	return res, nil
}

// redisPrefixes returns the Redis key prefixes of each dimension:
// prefix + "r:" (rate) or "c:" (concurrency) + the length of the dimension's
// name in decimal + ":" + name + ":". The length makes the encoding
// unambiguous: dimension "t" with key "a:b" is "r:1:t:a:b" and dimension
// "t:a" with key "b" is "r:3:t:a:b", so two dimensions (two tenants' keys)
// can never share a bucket, whatever characters names and keys contain.
func redisPrefixes(prefix string, dims []limit.Dimension) (r, c []string) {
	for _, d := range dims {
		mid := strconv.Itoa(len(d.Name)) + ":" + d.Name + ":"
		r = append(r, prefix+"r:"+mid)
		c = append(c, prefix+"c:"+mid)
	}
	return r, c
}

// testHookAdmitted, when set by a test, receives the Redis server time (µs)
// of each admission made through Redis.
var testHookAdmitted func(serverMicros int64)

func (l *Limiter) release(lease string) {
	l.mu.Lock()
	keys := l.leases[lease]
	delete(l.leases, lease)
	l.mu.Unlock()
	if len(keys) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.Timeout)
	defer cancel()
	pipe := l.rdb.Pipeline()
	for _, k := range keys {
		pipe.ZRem(ctx, k, lease)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		// The lease expires by TTL.
		l.m.errors.Inc()
	}
}
