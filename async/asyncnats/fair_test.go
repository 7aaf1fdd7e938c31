package asyncnats

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/veerhq/veer/async"
)

// TestFairOverJetStream: over the real engine, a tenant's 200-deep
// backlog submitted first does not stand in front of another tenant's 5:
// with one worker taking turns, b's five run among the first dozen
// attempts (FIFO: after all 200 of a's).
func TestFairOverJetStream(t *testing.T) {
	e := openEmbedded(t, t.TempDir(), async.Config{})
	var mu sync.Mutex
	var order []string
	done := make(chan struct{})
	d := async.DispatcherFunc(func(ctx context.Context, req *http.Request, inv *async.Invocation) (*http.Response, error) {
		mu.Lock()
		order = append(order, inv.Tenant)
		if len(order) == 205 {
			close(done)
		}
		mu.Unlock()
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody}, nil
	})
	cfg := async.Config{Groups: []async.Group{{Name: async.DefaultGroup, Concurrency: 1}}}
	s := newService(t, e, cfg, d, nil)
	defer s.Close()
	for range 200 {
		if _, _, err := s.Submit(context.Background(), &async.Invocation{Tenant: "a", Method: "POST", Host: "h", Path: "/"}); err != nil {
			t.Fatal(err)
		}
	}
	for range 5 {
		if _, _, err := s.Submit(context.Background(), &async.Invocation{Tenant: "b", Method: "POST", Host: "h", Path: "/"}); err != nil {
			t.Fatal(err)
		}
	}
	s.Start()
	<-done
	mu.Lock()
	defer mu.Unlock()
	last := -1
	for i, tn := range order {
		if tn == "b" {
			last = i
		}
	}
	if last < 0 || last > 11 {
		t.Fatalf("b's last invocation ran %dth of 205, want among the first 12", last+1)
	}
}
