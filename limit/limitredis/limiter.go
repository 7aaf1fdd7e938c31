package limitredis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/limit"
	"github.com/veerhq/veer/obs"
)

// Limiter is a limit.Admitter backed by Redis with a local fallback.
type Limiter struct {
	cfg    Config // the fields Apply cannot change; limits are in snap
	snap   atomic.Pointer[limits]
	ttlArg any // Config.LeaseTTL in µs, boxed once
	rdb    redis.UniversalClient
	local  *limit.Limiter
	log    *slog.Logger
	onFB   func(bool)
	clk    clock.Clock
	id     string
	seq    atomic.Uint64
	m      metrics

	fallback atomic.Bool

	mu     sync.Mutex
	leases map[string][]string // lease id -> concurrency keys

	applyMu sync.Mutex // serialises Apply

	batch batcher
	bg    background
}

var _ limit.Admitter = (*Limiter)(nil)

// ErrNoClient is returned by New when it is given no Redis client.
var ErrNoClient = errors.New("limitredis: nil Redis client")

// New returns a Limiter deciding through rdb (required: nil is
// ErrNoClient; an invalid cfg is an error naming the field). It starts the
// goroutines that batch decisions and schedules the lease renewal and the
// Redis probe on opts.Clock; Close stops them.
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
		cfg: cfg, ttlArg: cfg.LeaseTTL.Microseconds(),
		rdb: rdb, local: local, log: obs.LoggerOr(opts.Logger), clk: clock.Or(opts.Clock),
		id: hex.EncodeToString(idb[:]), m: newMetrics(opts.Registerer), onFB: opts.OnFallback,
		leases: map[string][]string{},
	}
	l.snap.Store(newLimits(cfg))
	l.m.state.Set(0)
	l.startFlushers()
	l.startBackground()
	return l, nil
}

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
		l.log.Warn("limitredis: Redis unreachable; deciding locally with limits ÷ instances", "instances", l.snap.Load().instances, "err", err)
		if l.onFB != nil {
			l.onFB(true)
		}
	}
}

// testHookAdmitted, when set by a test, receives the Redis server time (µs)
// of each admission made through Redis.
var testHookAdmitted func(serverMicros int64)

func (l *Limiter) admitRedis(ctx context.Context, keys []string) (limit.Result, error) {
	c := getCall()
	lims := l.snap.Load()
	if !l.prepare(&c.req, lims, keys) {
		putCall(c)
		return limit.Result{Allowed: true}, nil
	}
	if !l.submit(ctx, c) {
		return limit.Result{}, ctx.Err()
	}
	defer putCall(c)
	if c.err != nil {
		return limit.Result{}, c.err
	}
	v := c.reply
	if v[0] == 1 {
		if h := testHookAdmitted; h != nil {
			h(v[2])
		}
		var p limit.Permit
		if lease := c.req.lease; lease != "" {
			l.mu.Lock()
			l.leases[lease] = append([]string(nil), c.req.ckeys...)
			l.mu.Unlock()
			p = p.WithRelease(func() { l.release(lease) })
		}
		return limit.Result{Allowed: true, Permit: p}, nil
	}
	dim := int(v[1])
	if dim < 0 || dim >= len(lims.dims) || dim >= len(keys) {
		return limit.Result{}, errReply
	}
	res := limit.Result{Dimension: lims.dims[dim].name, Key: keys[dim], Reason: limit.Rate, RetryAfter: time.Duration(v[2])}
	if v[2] < 0 {
		res.Reason = limit.Concurrency
		res.RetryAfter = lims.concRetryAfter
	}
	l.m.rejected.WithLabelValues(res.Dimension, res.Reason.String()).Inc()
	return res, nil
}

// release gives a lease back: one round trip (batched with the decisions
// in flight), waited for, so that the slot is free for the very next
// decision. If Redis does not answer, the lease expires by its TTL.
func (l *Limiter) release(lease string) {
	l.mu.Lock()
	keys := l.leases[lease]
	delete(l.leases, lease)
	l.mu.Unlock()
	if len(keys) == 0 {
		return
	}
	c := getCall()
	c.release = true
	c.req.lease = lease
	c.req.ckeys = append(c.req.ckeys[:0], keys...)
	l.submit(context.Background(), c)
	if c.err != nil {
		l.m.errors.Inc()
	}
	putCall(c)
}
