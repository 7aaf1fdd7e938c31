package store

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// notify wakes every watch after a commit.
func (s *Bolt) notify() {
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
func (s *Bolt) Watch(ctx context.Context, prefix string, from int64) <-chan Event {
	out := make(chan Event, 64)
	wake := make(chan struct{}, 1)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		out <- Event{Type: Reset, Err: ErrClosed}
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
				case out <- Event{Type: Reset, Err: err}:
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

func (s *Bolt) sendReset(ctx context.Context, out chan<- Event) {
	select {
	case out <- Event{Type: Reset, Err: ErrClosed}:
	case <-ctx.Done():
	}
}

// readLog returns the events under prefix from revision next on, and the
// revision to continue from.
func (s *Bolt) readLog(prefix string, next uint64) ([]Event, uint64, error) {
	var evs []Event
	err := s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bMeta).Get(kComp); len(v) == 8 && next <= binary.BigEndian.Uint64(v) {
			return fmt.Errorf("%w: revision %d, oldest kept %d", ErrCompacted, next, binary.BigEndian.Uint64(v)+1)
		}
		c := tx.Bucket(bLog).Cursor()
		for k, v := c.Seek(u64(next)); k != nil; k, v = c.Next() {
			rev := binary.BigEndian.Uint64(k)
			next = rev + 1
			var le logEntry
			if err := json.Unmarshal(v, &le); err != nil {
				return fmt.Errorf("%w: log revision %d: %v", ErrCorrupt, rev, err)
			}
			if !strings.HasPrefix(le.Key, prefix) {
				continue
			}
			e := Event{Type: Put, Doc: Doc{Key: le.Key, Value: le.Value, Version: le.Version, Revision: int64(rev)}}
			if le.Deleted {
				e.Type, e.Doc.Value = Delete, nil
			}
			evs = append(evs, e)
		}
		return nil
	})
	return evs, next, err
}
