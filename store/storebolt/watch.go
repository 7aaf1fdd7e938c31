package storebolt

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/veerhq/veer/store"
)

// notify wakes every watch after a commit.
func (s *Store) notify() {
	s.mu.Lock()
	for c := range s.subs {
		select {
		case c <- struct{}{}:
		default:
		}
	}
	s.mu.Unlock()
}

// Watch implements Store. Events are read from the revision log, so a watch
// that starts at an old revision first replays what it missed.
func (s *Store) Watch(ctx context.Context, prefix string, from int64) <-chan store.Event {
	out := make(chan store.Event, 64)
	wake := make(chan struct{}, 1)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		out <- store.Event{Type: store.Reset, Err: store.ErrClosed}
		close(out)
		return out
	}
	s.subs[wake] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	if from < 1 {
		from = 1
	}
	go func() {
		defer s.wg.Done()
		defer close(out)
		defer func() {
			s.mu.Lock()
			delete(s.subs, wake)
			s.mu.Unlock()
		}()
		next := uint64(from)
		for {
			evs, n, err := s.readLog(prefix, next)
			if err != nil {
				select {
				case out <- store.Event{Type: store.Reset, Err: err}:
				case <-ctx.Done():
				}
				return
			}
			next = n
			for _, e := range evs {
				select {
				case out <- e:
				case <-ctx.Done():
					return
				case <-s.closing:
					s.sendReset(ctx, out)
					return
				}
			}
			select {
			case <-wake:
			case <-ctx.Done():
				return
			case <-s.closing:
				s.sendReset(ctx, out)
				return
			}
		}
	}()
	return out
}

func (s *Store) sendReset(ctx context.Context, out chan<- store.Event) {
	select {
	case out <- store.Event{Type: store.Reset, Err: store.ErrClosed}:
	case <-ctx.Done():
	}
}

// readLog returns the events under prefix from revision next on, and the
// revision to continue from.
func (s *Store) readLog(prefix string, next uint64) ([]store.Event, uint64, error) {
	var evs []store.Event
	err := s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bMeta).Get(kComp); len(v) == 8 && next <= binary.BigEndian.Uint64(v) {
			return fmt.Errorf("%w: revision %d, oldest kept %d", store.ErrCompacted, next, binary.BigEndian.Uint64(v)+1)
		}
		c := tx.Bucket(bLog).Cursor()
		for k, v := c.Seek(u64(next)); k != nil; k, v = c.Next() {
			rev := binary.BigEndian.Uint64(k)
			next = rev + 1
			var le logEntry
			if err := json.Unmarshal(v, &le); err != nil {
				return fmt.Errorf("%w: log revision %d: %v", store.ErrCorrupt, rev, err)
			}
			if !strings.HasPrefix(le.Key, prefix) {
				continue
			}
			e := store.Event{Type: store.Put, Doc: store.Doc{Key: le.Key, Value: le.Value, Version: le.Version, Revision: int64(rev)}}
			if le.Deleted {
				e.Type, e.Doc.Value = store.Delete, nil
			}
			evs = append(evs, e)
		}
		return nil
	})
	return evs, next, err
}
