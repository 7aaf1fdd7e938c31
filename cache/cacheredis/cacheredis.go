// Package cacheredis carries cache invalidations between instances over
// Redis pub/sub ("middleware data refreshed by publish/subscribe", seed 003).
//
// Bus.Publish sends a key on a channel; Bus.Subscribe delivers every key
// published on it (by any instance, this one included) to a callback,
// usually cache.Cache.InvalidateLocal. Pub/sub does not queue: messages sent
// while a subscriber is disconnected are lost, so after every reconnection
// Subscribe calls onResync (usually cache.Cache.ExpireAll), which makes the
// cache reload each value on its next use while still able to serve it stale.
//
// Failure mode: while Redis is down, Publish fails (the cache counts it) and
// subscribers keep their values until TTL; go-redis reconnects the
// subscription by itself.
package cacheredis

import (
	"cmp"
	"context"
	"errors"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/redis/go-redis/v9"

	"github.com/veerhq/veer/config"
)

// DefaultChannel is Config.Channel's default.
const DefaultChannel = "veer:cache:invalidations"

// Config is what a config file can say about a Bus. The zero value works.
type Config struct {
	// Channel is the Redis pub/sub channel; every instance of one cache
	// uses the same, each cache its own. Default DefaultChannel.
	Channel string `yaml:"channel" json:"channel"`
}

// Validate reports invalid fields.
func (c *Config) Validate() error {
	if strings.ContainsFunc(c.Channel, unicode.IsSpace) {
		return config.Field("channel", "must not contain white space, got %q", c.Channel)
	}
	return nil
}

// ErrNoClient is New's error for a nil Redis client.
var ErrNoClient = errors.New("cacheredis: nil Redis client")

// Bus publishes and subscribes invalidations on one channel.
type Bus struct {
	rdb     redis.UniversalClient
	channel string
}

// New returns a Bus on cfg.Channel through rdb (required). An invalid cfg
// is an error naming the field.
func New(cfg Config, rdb redis.UniversalClient) (*Bus, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if rdb == nil {
		return nil, ErrNoClient
	}
	return &Bus{rdb: rdb, channel: cmp.Or(cfg.Channel, DefaultChannel)}, nil
}

// Publish announces that key changed. It has the shape of
// cache.Options.Publish.
func (b *Bus) Publish(ctx context.Context, key string) error {
	return b.rdb.Publish(ctx, b.channel, key).Err()
}

// Subscription is a running subscription.
type Subscription struct {
	ps     *redis.PubSub
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Subscribe starts delivering keys to onKey, and calls onResync after each
// reconnection (not after the first subscription). It returns once the
// subscription is confirmed by Redis. Callbacks run on one goroutine, in
// order, and must not block for long.
func (b *Bus) Subscribe(ctx context.Context, onKey func(key string), onResync func()) (*Subscription, error) {
	ps := b.rdb.Subscribe(ctx, b.channel)
	// The first reply confirms the subscription.
	if _, err := ps.Receive(ctx); err != nil {
		ps.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &Subscription{ps: ps, cancel: cancel}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		backoff := 50 * time.Millisecond
		for {
			msg, err := ps.Receive(ctx)
			if err != nil {
				if ctx.Err() != nil || errors.Is(err, redis.ErrClosed) {
					return
				}
				// Receive reconnects on the next call; the confirmation
				// that follows triggers onResync. Back off while Redis is
				// down rather than spin.
				t := time.NewTimer(backoff)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
				backoff = min(2*backoff, 2*time.Second)
				continue
			}
			backoff = 50 * time.Millisecond
			switch m := msg.(type) {
			case *redis.Message:
				onKey(m.Payload)
			case *redis.Subscription:
				if m.Kind == "subscribe" && onResync != nil {
					onResync()
				}
			}
		}
	}()
	return s, nil
}

// Close ends the subscription and waits for its goroutine.
func (s *Subscription) Close() error {
	s.cancel()
	err := s.ps.Close()
	s.wg.Wait()
	return err
}
