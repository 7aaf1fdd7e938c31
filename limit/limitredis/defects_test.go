package limitredis

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/veerhq/veer/internal/redistest"
	"github.com/veerhq/veer/limit"
)

// TestNewRejectsNilClient: issue 19 defect 3. A nil client used to be
// accepted and the first Admit panicked.
func TestNewRejectsNilClient(t *testing.T) {
	var typedNil *redis.Client
	for _, rdb := range []redis.UniversalClient{nil, typedNil} {
		l, err := New(Config{}, rdb, Options{})
		if l != nil {
			l.Close()
		}
		if !errors.Is(err, ErrNoClient) {
			t.Fatalf("New with client %#v: %v, want ErrNoClient", rdb, err)
		}
	}
}

// TestDimensionsNeverShareKeys: issue 19 defect 1. Keys used to be prefix
// + dimension + ":" + key, so dimension "t" with key "a:b" and dimension
// "t:a" with key "b" were one Redis bucket: one tenant's traffic spent
// another's limit.
func TestDimensionsNeverShareKeys(t *testing.T) {
	srv := redistest.Start(t)
	one := limit.Limits{Rate: 0.001, Burst: 1, Concurrency: 1}
	l, _ := newLimiter(t, Config{Limits: limit.Config{Dimensions: []limit.Dimension{
		{Name: "t", Default: one},
		{Name: "t:a", Default: one},
	}}}, srv.Addr(), Options{})
	ctx := context.Background()
	first := l.Admit(ctx, []string{"a:b", ""})
	if !first.Allowed {
		t.Fatal("first request rejected")
	}
	second := l.Admit(ctx, []string{"", "b"})
	if !second.Allowed {
		t.Fatalf("dimension t:a key b was limited by dimension t key a:b: %+v", second)
	}
	if l.InFallback() {
		t.Fatal("decided locally, not through Redis")
	}
	// The keys of one dimension still share: the same request again is
	// limited.
	if again := l.Admit(ctx, []string{"", "b"}); again.Allowed {
		t.Fatal("second request of t:a/b admitted over burst 1")
	}
	first.Permit.Release()
	second.Permit.Release()
}
