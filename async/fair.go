package async

import (
	"context"
	"slices"
	"sync"
	"time"
)

// scheduler is one group's fair consumer: deficit round robin over the
// group's tenants, one invocation per tenant per turn (the quantum), so a
// tenant with a large backlog takes one worker slot per round like any
// other; a tenant over its rate, or paused, is skipped for the round. A
// worker slot is taken before fetching, so nothing waits in memory while
// its ack deadline runs.
type scheduler struct {
	s       *Service
	group   string
	slots   chan struct{} // one per worker: taken to fetch, given back when done
	wake    chan struct{} // a local submission to this group
	tenants []string
	next    int // round-robin position
	listed  time.Time
	mu      sync.Mutex
	buckets map[string]*bucket
}

func newScheduler(s *Service, g Group) *scheduler {
	sc := &scheduler{s: s, group: g.Name, slots: make(chan struct{}, g.Concurrency), wake: make(chan struct{}, 1), buckets: map[string]*bucket{}}
	for range g.Concurrency {
		sc.slots <- struct{}{}
	}
	return sc
}

// notify wakes an idle scheduler after a local submission.
func (sc *scheduler) notify() {
	select {
	case sc.wake <- struct{}{}:
	default:
	}
}

// wakeAfter wakes the scheduler when a retry this process scheduled
// comes due, so that it runs on time rather than at the next poll.
func (sc *scheduler) wakeAfter(d time.Duration) {
	sc.s.clk.AfterFunc(d, sc.notify)
}

// run hands deliveries to workers until the service closes.
func (sc *scheduler) run(ctx context.Context, wg *sync.WaitGroup) {
	for ctx.Err() == nil {
		select {
		case <-sc.slots:
		case <-ctx.Done():
			return
		}
		d, ok := sc.nextDelivery(ctx)
		if !ok {
			sc.slots <- struct{}{}
			sc.idle(ctx)
			continue
		}
		wg.Go(func() {
			defer func() { sc.slots <- struct{}{} }()
			sc.s.run(sc.group, d)
		})
	}
}

// idle waits one consumption interval, or less when a local submission
// arrives.
func (sc *scheduler) idle(ctx context.Context) {
	t := sc.s.clk.NewTimer(sc.s.cfg.PollInterval)
	defer t.Stop()
	select {
	case <-t.C():
	case <-sc.wake:
	case <-ctx.Done():
	}
}

// nextDelivery takes one turn of the round robin: starting after the last
// tenant served, the first tenant that is not paused, has a token and has
// a due invocation gives one. false: none has, this round.
func (sc *scheduler) nextDelivery(ctx context.Context) (Delivery, bool) {
	now := sc.s.clk.Now()
	if sc.tenants == nil || now.Sub(sc.listed) >= sc.s.cfg.PollInterval || len(sc.tenants) == 0 {
		ts, err := sc.s.eng.Tenants(ctx, sc.group)
		if err != nil {
			if ctx.Err() == nil {
				sc.s.log.Warn("async: listing tenants failed", "group", sc.group, "err", err)
			}
			return nil, false
		}
		slices.Sort(ts)
		if cur := sc.current(); cur != "" {
			// keep the round's position across a refresh
			i, _ := slices.BinarySearch(ts, cur)
			sc.next = i
		}
		sc.tenants, sc.listed = ts, now
	}
	if sc.s.paused(sc.group, "") {
		return nil, false
	}
	n := len(sc.tenants)
	for i := range n {
		tenant := sc.tenants[(sc.next+i)%n]
		if sc.s.paused("", tenant) || !sc.allow(tenant, now) {
			continue
		}
		ds, err := sc.s.eng.FetchTenant(ctx, sc.group, tenant, 1)
		if err != nil {
			if ctx.Err() == nil {
				sc.s.log.Warn("async: fetch failed", "group", sc.group, "err", err)
			}
			continue
		}
		if len(ds) == 0 {
			continue
		}
		sc.take(tenant)
		sc.next = (sc.next + i + 1) % n
		for _, extra := range ds[1:] { // an engine that returned more than asked
			_ = extra.Retry(0)
		}
		return ds[0], true
	}
	return nil, false
}

func (sc *scheduler) current() string {
	if len(sc.tenants) == 0 {
		return ""
	}
	return sc.tenants[sc.next%len(sc.tenants)]
}

// bucket is a tenant's token bucket for Config.TenantRate.
type bucket struct {
	tokens float64
	at     time.Time
}

// allow reports whether tenant may start an invocation now (no rate: always).
func (sc *scheduler) allow(tenant string, now time.Time) bool {
	rate := sc.s.cfg.TenantRate
	if rate <= 0 {
		return true
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	b := sc.buckets[tenant]
	burst := float64(max(sc.s.cfg.TenantBurst, 1))
	if b == nil {
		b = &bucket{tokens: burst, at: now}
		sc.buckets[tenant] = b
	}
	b.tokens = min(burst, b.tokens+now.Sub(b.at).Seconds()*rate)
	b.at = now
	return b.tokens >= 1
}

func (sc *scheduler) take(tenant string) {
	if sc.s.cfg.TenantRate <= 0 {
		return
	}
	sc.mu.Lock()
	sc.buckets[tenant].tokens--
	sc.mu.Unlock()
}
