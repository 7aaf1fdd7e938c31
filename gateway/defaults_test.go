package gateway

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestDefaultsSurviveAFrozenCluster: a config that names only routes,
// clusters, backends and a health path. Cluster a freezes (connections
// accepted, nothing answered, health checks included); every GET still
// succeeds (its attempt on a gives up at the derived try timeout, and the
// stall detector stops sending to a), and a gets only a handful of new
// requests. Before (try_timeout 15 s, max_ejected_share 0.5), the GETs
// routed to a waited past the client's 2 s and failed.
func TestDefaultsSurviveAFrozenCluster(t *testing.T) {
	var frozen atomic.Bool
	release := make(chan struct{})
	var aHits atomic.Int64
	freezer := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if frozen.Load() {
				aHits.Add(1)
				select {
				case <-release:
				case <-r.Context().Done():
					return
				}
			}
			body, _ := io.ReadAll(r.Body)
			_, _ = io.WriteString(w, name+" "+string(body))
		}
	}
	echo := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			_, _ = io.WriteString(w, name+" "+string(body))
		}
	}
	g, base := startGateway(t, fill(`
routes: [{name: all, policy: weighted, clusters: [{name: a}, {name: b}]}]
clusters:
  - {name: a, backends: [{address: A1}, {address: A2}], health: {path: /health}}
  - {name: b, backends: [{address: B1}, {address: B2}], health: {path: /health}}
`, "A1", upstream(t, freezer("a")), "A2", upstream(t, freezer("a")), "B1", upstream(t, echo("b")), "B2", upstream(t, echo("b"))))
	defer close(release)
	cl := &http.Client{Timeout: 2 * time.Second}
	type result struct {
		post bool
		ok   bool
		err  string
	}
	run := func(n int) []result {
		out := make([]result, n)
		var wg sync.WaitGroup
		sem := make(chan struct{}, 8)
		for i := range n {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				post := i%10 < 3
				var resp *http.Response
				var err error
				if post {
					resp, err = cl.Post(base+"/", "text/plain", strings.NewReader("x"))
				} else {
					resp, err = cl.Get(base + "/")
				}
				if err != nil {
					out[i] = result{post, false, err.Error()}
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				out[i] = result{post, resp.StatusCode == 200, resp.Status}
			}()
		}
		wg.Wait()
		return out
	}
	for _, r := range run(300) { // warm: the route learns its latency
		if !r.ok {
			t.Fatalf("before the freeze: %s", r.err)
		}
	}
	frozen.Store(true)
	var postFailed int
	for _, r := range run(600) {
		switch {
		case !r.ok && !r.post:
			t.Errorf("a GET failed while a was frozen: %s", r.err)
		case !r.ok:
			postFailed++ // a POST without a key sent to a frozen backend cannot be moved
		}
	}
	if n := aHits.Load(); n > 60 {
		t.Errorf("the frozen cluster got %d requests after the freeze, want it emptied within a few", n)
	}
	rt := g.snap.Load().routes[0]
	t.Logf("after the freeze: a got %d requests, %d of 180 POSTs failed; try timeout now %v, stall after %v", aHits.Load(), postFailed,
		rt.lat.TryTimeout(time.Now(), time.Hour), rt.lat.StallAfter(time.Now().UnixNano()))
}
