package asyncnats

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/veerhq/veer/async"
)

// ControlKV is the bucket of shared operator state (pauses): no TTL, so a
// pause lasts until a resume, across restarts and on every gateway of the
// cluster.
const ControlKV = "VEER_ASYNC_CONTROL"

func pauseKVKey(key string) string { return "pause." + hex.EncodeToString([]byte(key)) }

// SetPaused implements async.Engine: a put (pause) or delete (resume) in
// the control bucket, applied to this engine's view at once; the others
// see it through their watchers.
func (e *Engine) SetPaused(ctx context.Context, key string, paused bool) error {
	var err error
	if paused {
		_, err = e.ctl.Put(ctx, pauseKVKey(key), []byte("1"))
	} else {
		err = e.ctl.Delete(ctx, pauseKVKey(key))
	}
	if err != nil {
		return fmt.Errorf("asyncnats: pause: %w: %w", async.ErrUnavailable, err)
	}
	e.pauseMu.Lock()
	if paused {
		e.pauses[key] = true
	} else {
		delete(e.pauses, key)
	}
	e.pauseMu.Unlock()
	return nil
}

// Paused implements async.Engine: the watcher's view, no round trip.
func (e *Engine) Paused(ctx context.Context) (map[string]bool, error) {
	e.pauseMu.Lock()
	defer e.pauseMu.Unlock()
	return maps.Clone(e.pauses), nil
}

// watchPauses keeps e.pauses equal to the control bucket's pause keys,
// starting a new watch when one ends (a server restart), until Close.
// ready is closed once the bucket's current keys are in.
func (e *Engine) watchPauses(ready chan struct{}) {
	first := true
	for {
		ctx, cancel := context.WithCancel(context.Background())
		w, err := e.ctl.Watch(ctx, "pause.>")
		if err == nil {
			fresh := map[string]bool{}
			initial := true
		loop:
			for {
				select {
				case u, ok := <-w.Updates():
					if !ok {
						break loop
					}
					if u == nil { // the current keys are in
						initial = false
						e.pauseMu.Lock()
						e.pauses = fresh
						e.pauseMu.Unlock()
						if first {
							first = false
							close(ready)
						}
						continue
					}
					b, derr := hex.DecodeString(strings.TrimPrefix(u.Key(), "pause."))
					if derr != nil {
						continue
					}
					k, put := string(b), u.Operation() == jetstream.KeyValuePut
					if initial {
						if put {
							fresh[k] = true
						}
						continue
					}
					e.pauseMu.Lock()
					if put {
						e.pauses[k] = true
					} else {
						delete(e.pauses, k)
					}
					e.pauseMu.Unlock()
				case <-e.stop:
					_ = w.Stop()
					cancel()
					return
				}
			}
			_ = w.Stop()
		} else if !errors.Is(err, context.Canceled) {
			e.log.Warn("asyncnats: watching the shared pauses failed; trying again", "err", err)
		}
		cancel()
		select {
		case <-e.stop:
			return
		case <-time.After(time.Second):
		}
	}
}
