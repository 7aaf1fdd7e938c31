package shed

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/veerhq/veer/tier"
)

// TestRunStreamsOwnPools: each stream is a caller with its own connection
// pool, so no connection carries requests of two streams (a shared pool
// reuses the same few connections for both).
func TestRunStreamsOwnPools(t *testing.T) {
	var mu sync.Mutex
	callers := map[string]map[string]bool{} // remote address -> callers seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, c := tier.ParseHeader(r.Header)
		mu.Lock()
		if callers[r.RemoteAddr] == nil {
			callers[r.RemoteAddr] = map[string]bool{}
		}
		callers[r.RemoteAddr][c] = true
		mu.Unlock()
	}))
	defer srv.Close()
	mix := []Share{{tier.Critical, 1}}
	phases := []Phase{
		{Name: "a", Dur: 200 * time.Millisecond, Measure: true, Streams: []Stream{
			{Name: "one", Path: "/", Caller: "one", Mix: mix, Rate: 100},
			{Name: "two", Path: "/", Caller: "two", Mix: mix, Rate: 100},
		}},
		{Name: "b", Dur: 200 * time.Millisecond, Streams: []Stream{
			{Name: "one", Path: "/", Caller: "one", Mix: mix, Rate: 100},
			{Name: "two", Path: "/", Caller: "two", Workers: 2, Mix: mix},
		}},
	}
	client := NewClient(16)
	samples := Run(context.Background(), client, srv.URL, phases, time.Second, 1, false)
	ok := 0
	for _, s := range samples {
		if s.Status == http.StatusOK {
			ok++
		}
	}
	if ok < 40 {
		t.Fatalf("%d of %d requests answered 200; want at least 40", ok, len(samples))
	}
	mu.Lock()
	defer mu.Unlock()
	for addr, cs := range callers {
		if len(cs) > 1 {
			t.Fatalf("connection %s carried requests of %v; want one stream per connection", addr, cs)
		}
	}
}
