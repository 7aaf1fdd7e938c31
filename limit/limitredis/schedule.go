package limitredis

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/veerhq/veer/clock"
)

// background runs the lease renewal and the Redis probe as clock timers
// (clock.AfterFunc), so that a virtual clock drives them step by step.
//
// Renewal is on a fixed schedule: the k-th renewal is due k·LeaseTTL/3
// after New, and runs unconditionally (a late timer runs it at once and the
// schedule does not drift). A lease therefore never goes more than TTL/3
// plus one renewal's duration (at most Config.Timeout) without being
// pushed to TTL ahead: a live instance keeps about 2/3 of the TTL of
// margin. (It used to renew only on a tick found TTL/3 after the last
// renewal, and timer jitter made about half of those ticks nanoseconds
// short, so renewals ran 2/3 of the TTL apart.)
type background struct {
	mu      sync.Mutex
	closed  bool
	renewT  clock.Timer
	probeT  clock.Timer
	due     time.Time // of the next renewal
	running sync.WaitGroup
}

func (l *Limiter) startBackground() {
	b := &l.bg
	b.mu.Lock()
	defer b.mu.Unlock()
	b.due = l.clk.Now().Add(l.cfg.LeaseTTL / 3)
	b.renewT = l.clk.AfterFunc(l.cfg.LeaseTTL/3, l.renewTick)
	b.probeT = l.clk.AfterFunc(l.cfg.ProbeInterval, l.probeTick)
}

// enter reports whether a timer callback may run (not closed) and counts
// it as running.
func (b *background) enter() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.running.Add(1)
	return true
}

func (l *Limiter) renewTick() {
	b := &l.bg
	if !b.enter() {
		return
	}
	defer b.running.Done()
	l.renew(l.clk.Now())
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.due = b.due.Add(l.cfg.LeaseTTL / 3)
	b.renewT.Reset(max(0, b.due.Sub(l.clk.Now())))
}

func (l *Limiter) probeTick() {
	b := &l.bg
	if !b.enter() {
		return
	}
	defer b.running.Done()
	if l.fallback.Load() {
		l.probe()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.probeT.Reset(l.cfg.ProbeInterval)
	}
}

// Close stops the renewal and the probe and waits for a running one to
// finish (no Redis call is made for them after Close returns), and stops
// the batching goroutines once the decisions queued are sent. Admit still
// works after Close, one round trip per decision. Leases still held expire
// by their TTL.
func (l *Limiter) Close() error {
	b := &l.bg
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		b.renewT.Stop()
		b.probeT.Stop()
	}
	b.mu.Unlock()
	b.running.Wait()
	l.stopFlushers()
	return nil
}

func (l *Limiter) probe() {
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.Timeout)
	defer cancel()
	if err := l.rdb.Ping(ctx).Err(); err != nil {
		return
	}
	if l.fallback.CompareAndSwap(true, false) {
		l.m.state.Set(0)
		l.m.recoveries.Inc()
		l.log.Info("limitredis: Redis is back; deciding through Redis again")
		if l.onFB != nil {
			l.onFB(false)
		}
	}
}

// testHookRenewed, when set by a test, is called at each lease renewal
// with the clock's time.
var testHookRenewed func(now time.Time)

// renew pushes the expiry of every lease held to TTL after Redis's TIME.
func (l *Limiter) renew(now time.Time) {
	if h := testHookRenewed; h != nil {
		h(now)
	}
	l.mu.Lock()
	if len(l.leases) == 0 {
		l.mu.Unlock()
		return
	}
	var keys []string
	var args []any
	args = append(args, l.cfg.LeaseTTL.Microseconds())
	for lease, ks := range l.leases {
		for _, k := range ks {
			keys = append(keys, k)
			args = append(args, lease)
		}
	}
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.Timeout)
	defer cancel()
	if err := renewScript.Run(ctx, l.rdb, keys, args...).Err(); err != nil && !errors.Is(err, redis.Nil) {
		l.m.errors.Inc()
	}
}
