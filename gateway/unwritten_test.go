package gateway

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// A POST whose upstream connection was reset before any byte of it was
// written never reached the upstream: it is retried on the route's other
// cluster, with its body, through the gateway's own HTTP/1.1 client and
// through http.Transport (a cluster with a connection cap uses it). Before
// attempts reported outcome.Unwritten, both answered 502.
func TestUnwrittenPOSTRetried(t *testing.T) {
	b, bHits := echoUpstream(t, "b")
	rst, dial := resetBeforeRead(t)
	cfg := parseConfig(t, fill(`
routes:
  - {name: own, path_prefix: /own, clusters: [{name: rst}, {name: b}]}
  - {name: std, path_prefix: /std, clusters: [{name: rststd}, {name: b}]}
clusters:
  - {name: rst, backends: [{address: RST}], outlier: {consecutive_errors: 1000}}
  - {name: rststd, max_conns_per_backend: 8, backends: [{address: RST}], outlier: {consecutive_errors: 1000}}
  - {name: b, backends: [{address: B}]}
retry: {policy: {initial: 1ms}, budget: {min_retries: 100}}
`, "RST", rst, "B", b))
	g := startGatewayOpts(t, cfg, Options{DialContext: dial})
	if _, ok := g.snap.Load().clusters["rststd"].transport.(*http.Transport); !ok {
		t.Fatal("cluster rststd does not use http.Transport")
	}
	for _, path := range []string{"/own", "/std"} {
		before := bHits.Load()
		resp, err := http.Post("http://"+g.Addrs().Plain+path, "text/plain", strings.NewReader("payload"))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "b POST payload" || bHits.Load() != before+1 {
			t.Errorf("%s: %d %q (b hit %d times), want 200 from b once", path, resp.StatusCode, body, bHits.Load()-before)
		}
	}
}
