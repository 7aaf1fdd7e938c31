package async

import (
	"context"
	"time"
)

// Engine is the durable store under the service: a JetStream stream in
// asyncnats, the one implementation. Every method is safe for concurrent
// use.
type Engine interface {
	// Enqueue stores inv durably (synced to disk) in its group's queue and
	// returns its id only then. With inv.Key set it is deduplicated per
	// tenant within the idempotency window: the same (tenant, key)
	// returns the first submission's id and existing true, storing
	// nothing. An error wraps ErrUnavailable and means nothing was
	// acknowledged.
	Enqueue(ctx context.Context, inv *Invocation) (id string, existing bool, err error)
	// Requeue stores inv again, under its own id, in its (now possibly
	// different) group's queue: a retry moved to the retry group. dedup
	// names this requeue: the same dedup twice (within the idempotency
	// window) stores it once.
	Requeue(ctx context.Context, inv *Invocation, dedup string) error
	// Tenants lists the tenants that have (or had, within the retention)
	// invocations in group: the fair scheduler's round.
	Tenants(ctx context.Context, group string) ([]string, error)
	// FetchTenant returns at once up to max of tenant's due invocations
	// in group, none when there are none.
	FetchTenant(ctx context.Context, group, tenant string, max int) ([]Delivery, error)
	// Lookup returns the stored invocation, ErrNotFound or ErrBadID.
	Lookup(ctx context.Context, id string) (*Invocation, error)
	// Status returns the recorded status of id; found is false when
	// nothing was recorded yet (the invocation is still queued).
	Status(ctx context.Context, id string) (st Status, found bool, err error)
	// SetStatus records st durably.
	SetStatus(ctx context.Context, st Status) error
	// List returns up to limit of tenant's invocations in submission
	// order after cursor (0: from the start), and the cursor of the next
	// page (0: no more).
	List(ctx context.Context, tenant string, cursor uint64, limit int) (invs []*Invocation, next uint64, err error)
	// DeadLetter stores a failed invocation with its final status.
	DeadLetter(ctx context.Context, inv *Invocation, st Status) error
	// Depth returns how many of group's invocations wait or run, and the
	// submission time of the oldest (zero when none).
	Depth(ctx context.Context, group string) (n uint64, oldest time.Time, err error)
	// Replay submits up to max of group's dead letters again (new ids,
	// not deduplicated by their keys) and removes them from the dead
	// letters; it returns the new ids.
	Replay(ctx context.Context, group string, max int) ([]string, error)
	// Purge drops the queued invocations of a group, a tenant, or a
	// tenant in a group ("" for any): they are forgotten, never run.
	Purge(ctx context.Context, group, tenant string) error
	// SetPaused records (true) or lifts (false) a pause of key where every
	// service on the same store sees it; a restart keeps it.
	SetPaused(ctx context.Context, key string, paused bool) error
	// Paused returns the pauses in force; it must be cheap (it is called
	// at every consumption interval).
	Paused(ctx context.Context) (map[string]bool, error)
	// Close releases the engine (and stops an embedded server).
	Close() error
}

// Delivery is one delivery of an invocation to a worker. Until Ack or
// Retry, the engine delivers it again after the ack deadline.
type Delivery interface {
	Invocation() *Invocation
	// Ack: done, never delivered again.
	Ack() error
	// Retry delivers it again after delay.
	Retry(delay time.Duration) error
	// InProgress extends the ack deadline.
	InProgress() error
}
