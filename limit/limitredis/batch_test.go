package limitredis

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/veerhq/veer/internal/redistest"
	"github.com/veerhq/veer/limit"
)

// TestAbandonedCallReleasesLease: a caller whose context ends while its
// decision is on the wire gets a local decision at once; when Redis
// answers later and admitted the request, the lease it took is released
// (nobody else would release it, and it would hold a slot for the TTL).
func TestAbandonedCallReleasesLease(t *testing.T) {
	srv := redistest.Start(t)
	l, _ := newLimiter(t, Config{Timeout: 5 * time.Second, Limits: limit.Config{Dimensions: []limit.Dimension{
		{Name: "function", Default: limit.Limits{Concurrency: 5}},
	}}}, srv.Addr(), Options{})
	if r := l.Admit(context.Background(), []string{"warm-up"}); !r.Allowed {
		t.Fatal("warm-up rejected")
	} else {
		r.Permit.Release()
	}
	srv.Pause()
	sending := make(chan int, 1)
	testHookSending = func(n int) {
		select {
		case sending <- n:
		default:
		}
	}
	defer func() { testHookSending = nil }()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan limit.Result)
	go func() { done <- l.Admit(ctx, []string{"resize"}) }()
	if n := <-sending; n != 1 { // the call is on the wire; Redis is frozen
		t.Fatalf("batch of %d, want 1", n)
	}
	cancel()
	r := <-done
	if !r.Allowed || l.InFallback() {
		t.Fatalf("abandoned call: %+v, fallback %v; want a local admission, Redis not declared dead", r, l.InFallback())
	}
	r.Permit.Release()
	srv.Resume()
	l.Close() // sends what is queued, the release included
	n, err := client(t, srv.Addr()).ZCard(context.Background(), l.snap.Load().dims[0].cprefix+"resize").Result()
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d leases left in Redis for an abandoned call, want 0", n)
	}
}

// TestBatchesKeepEachRequestAtomic: many concurrent requests with two
// dimensions, batched, never admit past either limit, and a rejection by
// the second dimension takes nothing from the first.
func TestBatchesKeepEachRequestAtomic(t *testing.T) {
	srv := redistest.Start(t)
	l, _ := newLimiter(t, Config{Timeout: 5 * time.Second, Limits: limit.Config{Dimensions: []limit.Dimension{
		{Name: "tenant", Default: limit.Limits{Rate: 0.001, Burst: 40}},
		{Name: "api", Default: limit.Limits{Rate: 0.001, Burst: 10}},
	}}}, srv.Addr(), Options{})
	var batches atomic.Int64
	testHookSending = func(int) { batches.Add(1) }
	defer func() { testHookSending = nil }()
	var mu sync.Mutex
	admitted := map[string]int{}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 10 {
				api := []string{"a", "b", "c", "d", "e"}[(g+i)%5]
				if r := l.Admit(context.Background(), []string{"acme", api}); r.Allowed {
					mu.Lock()
					admitted[api]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	total := 0
	for api, n := range admitted {
		if n > 10 {
			t.Errorf("api %s admitted %d, over its burst 10", api, n)
		}
		total += n
	}
	// 160 requests, 32 per api: each api's burst of 10 binds (50 in all),
	// then the tenant's 40: exactly 40 admitted, whatever the batches.
	if total != 40 {
		t.Fatalf("admitted %d, want the tenant's 40 (api rejections must not spend the tenant's burst)", total)
	}
	if l.InFallback() || batches.Load() == 0 {
		t.Fatal("decided locally, not through Redis batches")
	}
}
