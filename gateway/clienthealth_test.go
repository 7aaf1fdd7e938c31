package gateway

import (
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/internal/metrictest"
	"github.com/veerhq/veer/outcome"
)

// TestClientHealthPath: the gateway answers outcome.HealthPath itself, per
// Host, without relaying it (backends that answer 404 there made every
// canary fail, issue 27 defect 2); when nothing behind it can serve, its
// answers carry Veer-Outcome: upstream_unavailable, read back by Classify as
// a failure of the domain, not as shedding (defect 3).
func TestClientHealthPath(t *testing.T) {
	a, aHits := echoUpstream(t, "a")
	g, base := startGateway(t, fill(`
routes:
  - {name: api, host: api.test, path_prefix: /api, clusters: [{name: c}]}
clusters:
  - {name: c, backends: [{address: A}]}
`, "A", a))
	cl := &http.Client{}
	steps := []struct {
		name     string
		do       func()
		host     string
		path     string
		status   int
		header   string
		classify outcome.Kind
	}{
		{"healthy: 200 from the gateway, whatever the route's prefix", nil, "api.test", outcome.HealthPath, 200, "", outcome.Success},
		{"any case and port", nil, "API.test:8080", outcome.HealthPath, 200, "", outcome.Success},
		{"a host no route serves: 404", nil, "nowhere.test", outcome.HealthPath, 404, "", outcome.ClientError},
		{"cluster drained: 503 upstream_unavailable", func() { must(t, g.Drain("c", "", true)) }, "api.test", outcome.HealthPath, 503, "upstream_unavailable", outcome.UpstreamUnavailable},
		{"and app traffic says the same", nil, "api.test", "/api/x", 503, "upstream_unavailable", outcome.UpstreamUnavailable},
		{"undrained: healthy again", func() { must(t, g.Drain("c", "", false)) }, "api.test", outcome.HealthPath, 200, "", outcome.Success},
		{"app traffic flows", nil, "api.test", "/api/x", 200, "", outcome.Success},
	}
	for _, st := range steps {
		if st.do != nil {
			st.do()
		}
		resp, body := get(t, cl, base+st.path, "Host", st.host)
		if resp.StatusCode != st.status || resp.Header.Get(outcome.HeaderOutcome) != st.header {
			t.Errorf("%s: %d %s=%q %q, want %d %q", st.name, resp.StatusCode, outcome.HeaderOutcome, resp.Header.Get(outcome.HeaderOutcome), body, st.status, st.header)
		}
		if k := outcome.Classify(resp, nil).Kind; k != st.classify {
			t.Errorf("%s: classified %v, want %v", st.name, k, st.classify)
		}
		if st.status == 200 && st.path == outcome.HealthPath && !strings.Contains(body, `"route":"api"`) {
			t.Errorf("%s: body %q", st.name, body)
		}
	}
	reg := g.opts.Registerer.(prometheus.Gatherer)
	if n := metrictest.Sum(t, reg, "veer_gateway_requests_total", map[string]string{"route": "api", "kind": "upstream_unavailable"}); n != 2 {
		t.Errorf("%v requests counted upstream_unavailable, want 2 (the drained health answer and app request)", n)
	}
	if n := aHits.Load(); n != 1 {
		t.Fatalf("the backend saw %d requests, want 1 (the app request): health answers are the gateway's own", n)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
