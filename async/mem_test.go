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
	ready  map[string]chan *memDelivery
	dead   chan Status
}

func newMemEngine(groups ...string) *memEngine {
	e := &memEngine{invs: map[string]*Invocation{}, keys: map[string]string{}, status: map[string]Status{},
		ready: map[string]chan *memDelivery{}, dead: make(chan Status, 100)}
	for _, g := range append(groups, DefaultGroup) {
		e.ready[g] = make(chan *memDelivery, 10000)
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
	e.ready[c.Group] <- &memDelivery{e: e, inv: &c}
	return c.ID, false, nil
}

func (e *memEngine) Fetch(ctx context.Context, group string) (Delivery, error) {
	select {
	case d := <-e.ready[group]:
		return d, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
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

type memDelivery struct {
	e   *memEngine
	inv *Invocation
}

func (d *memDelivery) Invocation() *Invocation { return d.inv }
func (d *memDelivery) Ack() error              { return nil }
func (d *memDelivery) InProgress() error       { return nil }
func (d *memDelivery) Retry(delay time.Duration) error {
	time.AfterFunc(delay, func() { d.e.ready[d.inv.Group] <- d })
	return nil
}
