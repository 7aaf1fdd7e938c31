package asyncnats

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/veerhq/veer/async"
	"github.com/veerhq/veer/async/asyncnats/natstest"
)

// TestFairOverJetStream: over the real engine, a tenant's 200-deep
// backlog submitted first does not stand in front of another tenant's 5:
// with one worker taking turns, b's five run among the first dozen
// attempts (FIFO: after all 200 of a's). With batch on (the default), a's
// backlog is submitted by 16 concurrent clients and b's 5 with a's last
// ones, so that packs mix both tenants: distributed to their tenants'
// queues, b's still run among the first dozen.
//
// "external batch": the same on Debian's nats-server 2.9.
func TestFairOverJetStream(t *testing.T) {
	t.Run("batch", func(t *testing.T) { fairOverJetStream(t, true, false) })
	t.Run("unbatched", func(t *testing.T) { fairOverJetStream(t, false, false) })
	t.Run("external batch", func(t *testing.T) { fairOverJetStream(t, true, true) })
}

func fairOverJetStream(t *testing.T, batch, external bool) {
	var e *Engine
	if external {
		srv := natstest.Start(t, t.TempDir())
		e = openExternal(t, srv.URL(), async.Config{Batch: new(batch)})
	} else {
		e = openEmbedded(t, t.TempDir(), async.Config{Batch: new(batch)})
	}
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
	cfg := async.Config{Batch: new(batch), Groups: []async.Group{{Name: async.DefaultGroup, Concurrency: 1}}}
	s := newService(t, e, cfg, d, nil)
	defer s.Close()
	submit := func(tenant string) {
		if _, _, err := s.Submit(context.Background(), &async.Invocation{Tenant: tenant, Method: "POST", Host: "h", Path: "/"}); err != nil {
			t.Error(err)
		}
	}
	if batch {
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Go(func() {
				for range 12 {
					submit("a")
				}
				if i < 5 {
					submit("b")
				}
				if i < 8 {
					submit("a")
				}
			})
		}
		wg.Wait()
		info, err := e.stream.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs >= 205 {
			t.Fatalf("%d messages for 205 submissions: nothing packed", info.State.Msgs)
		}
	}
	if batch {
		mixed := false
		for seq := uint64(1); ; seq++ {
			raw, err := e.stream.GetMsg(context.Background(), seq, jetstream.WithGetMsgSubject(ingestSubject))
			if err != nil {
				break
			}
			seq = raw.Sequence
			invs, _ := decodeAll(raw.Sequence, raw.Header, raw.Data)
			ts := map[string]bool{}
			for _, inv := range invs {
				ts[inv.Tenant] = true
			}
			mixed = mixed || len(ts) > 1
		}
		if !mixed {
			t.Fatal("no ingest pack holds both tenants' submissions")
		}
	}
	if !batch {
		for range 200 {
			submit("a")
		}
		for range 5 {
			submit("b")
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
