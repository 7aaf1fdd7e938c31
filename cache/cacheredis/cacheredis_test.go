package cacheredis

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/veerhq/veer/cache"
	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/internal/must"
	"github.com/veerhq/veer/internal/redistest"
)

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func wait[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("no %s within 10 s", what)
	}
	var zero T
	return zero
}

func TestInvalidationAcrossInstances(t *testing.T) {
	srv := redistest.Start(t)
	newClient := func() *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
		t.Cleanup(func() { c.Close() })
		return c
	}
	version := "v1"
	load := func(_ context.Context, key string) (string, error) { return key + "@" + version, nil }

	busA := must.Get(New(Config{Channel: "veer:cache:tokens"}, newClient()))
	busB := must.Get(New(Config{Channel: "veer:cache:tokens"}, newClient()))
	a, err := cache.New(cache.Config{TTL: time.Hour}, load, cache.Options{Name: "a", Publish: busA.Publish, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := cache.New(cache.Config{TTL: time.Hour}, load, cache.Options{Name: "b", Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 8)
	resynced := make(chan struct{}, 8)
	sub, err := busB.Subscribe(context.Background(), func(key string) {
		b.InvalidateLocal(key)
		got <- key
	}, func() {
		b.ExpireAll()
		resynced <- struct{}{}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	ctx := context.Background()
	a.Get(ctx, "alice")
	if v, _, _ := b.Get(ctx, "alice"); v != "alice@v1" {
		t.Fatalf("b: %q", v)
	}
	version = "v2"
	a.Invalidate(ctx, "alice")
	if k := wait(t, got, "invalidation message"); k != "alice" {
		t.Fatalf("b received %q", k)
	}
	if v, st, _ := b.Get(ctx, "alice"); v != "alice@v2" || st != cache.Loaded {
		t.Fatalf("b after invalidation: %q %v, want a reload", v, st)
	}

	// Redis restarts: messages may have been lost, so b expires everything
	// once its subscription is back.
	srv.Kill()
	srv.Restart()
	wait(t, resynced, "resync after reconnect")
	version = "v3"
	if v, st, _ := b.Get(ctx, "alice"); v != "alice@v3" || st != cache.Loaded {
		t.Fatalf("b after resync: %q %v, want a reload", v, st)
	}
	// And the subscription works again.
	a.Invalidate(ctx, "alice")
	if k := wait(t, got, "invalidation after reconnect"); k != "alice" {
		t.Fatalf("b received %q", k)
	}
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{}) // never dialled
	defer rdb.Close()
	if _, err := New(Config{Channel: "two words"}, rdb); strings.Join(config.Fields(err), ",") != "channel" {
		t.Errorf("channel with a space: %v, want an error naming channel", err)
	}
	if _, err := New(Config{}, nil); !errors.Is(err, ErrNoClient) {
		t.Errorf("nil client: %v, want ErrNoClient", err)
	}
	b := must.Get(New(Config{}, rdb))
	if b.channel != DefaultChannel {
		t.Errorf("zero config: channel %q, want %q", b.channel, DefaultChannel)
	}
}
