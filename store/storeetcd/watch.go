package storeetcd

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/veerhq/veer/store"
)

// Watch implements store.Store over etcd's watch. While etcd is down the
// channel stays open and etcd's client resumes from the last revision seen;
// a compacted revision or a cancelled watch ends it with a Reset.
func (s *Store) Watch(ctx context.Context, prefix string, from int64) <-chan store.Event {
	out := make(chan store.Event, 64)
	ctx, cancel := context.WithCancel(ctx)
	wc := s.cli.Watch(ctx, s.dkey(prefix), clientv3.WithPrefix(), clientv3.WithRev(max(from, 1)))
	send := func(e store.Event) bool {
		select {
		case out <- e:
			return true
		case <-ctx.Done():
			return false
		}
	}
	go func() {
		defer close(out)
		defer cancel()
		for {
			r, ok := <-wc
			if !ok {
				if ctx.Err() == nil {
					send(store.Event{Type: store.Reset, Err: fmt.Errorf("%w: etcd watch closed", store.ErrUnavailable)})
				}
				return
			}
			if r.CompactRevision != 0 {
				send(store.Event{Type: store.Reset, Err: fmt.Errorf("%w: etcd compacted to %d", store.ErrCompacted, r.CompactRevision)})
				return
			}
			if err := r.Err(); err != nil {
				send(store.Event{Type: store.Reset, Err: fmt.Errorf("%w: etcd watch: %v", store.ErrUnavailable, err)})
				return
			}
			for _, ev := range r.Events {
				e, err := s.event(ev)
				if err != nil {
					send(store.Event{Type: store.Reset, Err: err})
					return
				}
				if !send(e) {
					return
				}
			}
		}
	}()
	return out
}

func (s *Store) event(ev *clientv3.Event) (store.Event, error) {
	key := strings.TrimPrefix(string(ev.Kv.Key), s.dkey(""))
	if ev.Type == clientv3.EventTypeDelete {
		return store.Event{Type: store.Delete, Doc: store.Doc{Key: key, Revision: ev.Kv.ModRevision}}, nil
	}
	var d stored
	if err := json.Unmarshal(ev.Kv.Value, &d); err != nil {
		return store.Event{}, fmt.Errorf("%w: document %q: %v", store.ErrCorrupt, key, err)
	}
	return store.Event{Type: store.Put, Doc: store.Doc{Key: key, Value: d.Value, Version: d.Version, Revision: ev.Kv.ModRevision}}, nil
}
