package store

import (
	"context"
	"maps"
	"time"

	"github.com/veerhq/veer/clock"
)

// DefaultFollowBackoff is how long Follow waits before re-listing after a
// failed list or a Reset.
const DefaultFollowBackoff = 500 * time.Millisecond

// Snapshot is an immutable view of the documents under a prefix at one
// revision. Consumers must not modify it.
type Snapshot struct {
	Revision int64
	Docs     map[string]Doc
}

// FollowOptions tune Follow; the zero value works.
type FollowOptions struct {
	// Clock times the backoff; default clock.Real.
	Clock clock.Clock
	// Backoff is the wait before a re-list; default DefaultFollowBackoff.
	Backoff time.Duration
	// OnReset, if set, is told why a watch ended or a list failed.
	OnReset func(error)
}

// Follow keeps a consumer in step with the documents under prefix until
// ctx ends: it lists them, hands apply a Snapshot, then watches from the
// next revision and hands apply a new Snapshot after each batch of changes.
// When the watch is Reset (compacted, backend gone) or a list fails, it
// waits Backoff and re-lists, so the consumer always converges on the
// store's state. apply runs on Follow's goroutine, one call at a time; the
// last snapshot stays valid while the store is unreachable.
func Follow(ctx context.Context, s Store, prefix string, opts FollowOptions, apply func(*Snapshot)) {
	clk := clock.Or(opts.Clock)
	backoff := opts.Backoff
	if backoff <= 0 {
		backoff = DefaultFollowBackoff
	}
	fail := func(err error) bool {
		if opts.OnReset != nil && ctx.Err() == nil {
			opts.OnReset(err)
		}
		t := clk.NewTimer(backoff)
		defer t.Stop()
		select {
		case <-t.C():
			return true
		case <-ctx.Done():
			return false
		}
	}
	var last int64 = -1
	for ctx.Err() == nil {
		docs, rev, err := s.List(ctx, prefix)
		if err != nil {
			if !fail(err) {
				return
			}
			continue
		}
		cur := &Snapshot{Revision: rev, Docs: make(map[string]Doc, len(docs))}
		for _, d := range docs {
			cur.Docs[d.Key] = d
		}
		if rev != last {
			apply(cur)
			last = rev
		}
		err = follow(ctx, s.Watch(ctx, prefix, rev+1), cur, func(sn *Snapshot) {
			apply(sn)
			last = sn.Revision
		})
		if err == nil || !fail(err) {
			return
		}
	}
}

// follow applies watch events to cur in batches; it returns the Reset's
// error, or nil when the channel closed because ctx ended.
func follow(ctx context.Context, ch <-chan Event, cur *Snapshot, apply func(*Snapshot)) error {
	for {
		e, ok := <-ch
		if !ok {
			return closedErr(ctx)
		}
		next := &Snapshot{Revision: cur.Revision, Docs: maps.Clone(cur.Docs)}
		for {
			if e.Type == Reset {
				if next.Revision != cur.Revision {
					apply(next)
				}
				return e.Err
			}
			if e.Type == Delete {
				delete(next.Docs, e.Doc.Key)
			} else {
				next.Docs[e.Doc.Key] = e.Doc
			}
			next.Revision = e.Doc.Revision
			select {
			case e, ok = <-ch:
				if !ok {
					apply(next)
					return closedErr(ctx)
				}
				continue
			default:
			}
			break
		}
		apply(next)
		cur = next
	}
}

// closedErr is why a watch channel closed without a Reset: nil when ctx
// ended (Follow stops), else ErrUnavailable (Follow re-lists).
func closedErr(ctx context.Context) error {
	if ctx.Err() != nil {
		return nil
	}
	return ErrUnavailable
}
