package async

import (
	"context"
	"sync"
	"time"
)

// memEngine is an in-memory Engine for the tests that need virtual time
// (testing/synctest): JetStream's redelivery delays run on the server's
// wall clock, which a bubble cannot advance. The JetStream engine runs the
// same service in async/asyncnats' tests.
type memEngine struct {
	mu     sync.Mutex
	seq    uint64
	invs   map[string]*Invocation
	keys   map[string]string
	status map[string]Status
	ready  map[string]map[string][]*memDelivery // group -> tenant -> due
	dead   chan Status
	pauses map[string]bool
}

func newMemEngine(groups ...string) *memEngine {
	e := &memEngine{invs: map[string]*Invocation{}, keys: map[string]string{}, status: map[string]Status{},
		ready: map[string]map[string][]*memDelivery{}, dead: make(chan Status, 100)}
	for _, g := range append(groups, DefaultGroup, RetryGroup, TimerGroup) {
		e.ready[g] = map[string][]*memDelivery{}
	}
	return e
}

func (e *memEngine) Enqueue(ctx context.Context, inv *Invocation) (string, bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if inv.Key != "" {
		if id, ok := e.keys[DedupID(inv.Tenant, inv.Key)]; ok {
			return id, true, nil
		}
	}
	e.seq++
	c := *inv
	c.ID = FormatID(e.seq, Nonce(inv.Tenant, inv.Key))
	inv.ID = c.ID
	e.invs[c.ID] = &c
	if inv.Key != "" {
		e.keys[DedupID(inv.Tenant, inv.Key)] = c.ID
	}
	e.ready[c.Group][c.Tenant] = append(e.ready[c.Group][c.Tenant], &memDelivery{e: e, inv: &c})
	return c.ID, false, nil
}

func (e *memEngine) Requeue(ctx context.Context, inv *Invocation, dedup string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.keys[dedup]; ok {
		return nil
	}
	e.keys[dedup] = inv.ID
	c := *inv
	if e.ready[c.Group] == nil {
		e.ready[c.Group] = map[string][]*memDelivery{}
	}
	e.ready[c.Group][c.Tenant] = append(e.ready[c.Group][c.Tenant], &memDelivery{e: e, inv: &c})
	return nil
}

func (e *memEngine) Tenants(ctx context.Context, group string) ([]string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for t := range e.ready[group] {
		out = append(out, t)
	}
	return out, nil
}

func (e *memEngine) FetchTenant(ctx context.Context, group, tenant string, n int) ([]Delivery, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	q := e.ready[group][tenant]
	var out []Delivery
	now := time.Now()
	var rest []*memDelivery
	for _, d := range q {
		if len(out) < n && !d.due.After(now) {
			out = append(out, d)
		} else {
			rest = append(rest, d)
		}
	}
	e.ready[group][tenant] = rest
	return out, nil
}

func (e *memEngine) Lookup(ctx context.Context, id string) (*Invocation, error) {
	if _, _, err := ParseID(id); err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if inv, ok := e.invs[id]; ok {
		return inv, nil
	}
	return nil, ErrNotFound
}

func (e *memEngine) Status(ctx context.Context, id string) (Status, bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	st, ok := e.status[id]
	return st, ok, nil
}

func (e *memEngine) SetStatus(ctx context.Context, st Status) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.status[st.ID] = st
	return nil
}

func (e *memEngine) List(ctx context.Context, tenant string, cursor uint64, limit int) ([]*Invocation, uint64, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []*Invocation
	for seq := max(cursor, 1); seq <= e.seq; seq++ {
		for id, inv := range e.invs {
			if s, _, _ := ParseID(id); s == seq && inv.Tenant == tenant {
				if len(out) == limit {
					return out, seq, nil
				}
				out = append(out, inv)
			}
		}
	}
	return out, 0, nil
}

func (e *memEngine) DeadLetter(ctx context.Context, inv *Invocation, st Status) error {
	e.dead <- st
	return nil
}

func (e *memEngine) Close() error { return nil }

func (e *memEngine) SetPaused(ctx context.Context, key string, paused bool) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pauses == nil {
		e.pauses = map[string]bool{}
	}
	if paused {
		e.pauses[key] = true
	} else {
		delete(e.pauses, key)
	}
	return nil
}

func (e *memEngine) Paused(ctx context.Context) (map[string]bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]bool{}
	for k := range e.pauses {
		out[k] = true
	}
	return out, nil
}

type memDelivery struct {
	e   *memEngine
	inv *Invocation
	due time.Time // invisible until then, as a JetStream message after NakWithDelay
}

func (d *memDelivery) Invocation() *Invocation { return d.inv }
func (d *memDelivery) Ack() error              { return nil }
func (d *memDelivery) InProgress() error       { return nil }
func (d *memDelivery) Retry(delay time.Duration) error {
	d.e.mu.Lock()
	defer d.e.mu.Unlock()
	d.due = time.Now().Add(delay)
	q := d.e.ready[d.inv.Group]
	q[d.inv.Tenant] = append(q[d.inv.Tenant], d)
	return nil
}

func (e *memEngine) Depth(ctx context.Context, group string) (uint64, time.Time, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var n uint64
	var oldest time.Time
	for _, q := range e.ready[group] {
		for _, d := range q {
			n++
			if oldest.IsZero() || d.inv.Submitted.Before(oldest) {
				oldest = d.inv.Submitted
			}
		}
	}
	return n, oldest, nil
}

func (e *memEngine) Replay(ctx context.Context, group string, max int) ([]string, error) {
	return nil, nil
}

func (e *memEngine) Purge(ctx context.Context, group, tenant string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for g, byTenant := range e.ready {
		if group == "" || g == group {
			for t := range byTenant {
				if tenant == "" || t == tenant {
					delete(byTenant, t)
				}
			}
		}
	}
	return nil
}
