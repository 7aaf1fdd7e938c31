package dnsserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/veerhq/veer/clock"
)

// TestNodeHealthSteps: NodeHealth and HealthHandler report each access
// node's probe as the rounds see it, with the time of the last change, as a
// step table on a manual clock (the probes are real TCP connects).
func TestNodeHealthSteps(t *testing.T) {
	a, b := newNode(t), newNode(t)
	yaml := fmt.Sprintf(`
listen: 127.0.0.1:0
health: {interval: 3s, timeout: 3s}
zones:
  - origin: example.test.
    records: ["www A 192.0.2.1"]
    access:
      - name: api
        nodes:
          - {addr: 192.0.2.11, region: east, check: "%s"}
          - {addr: 192.0.2.12, region: east, check: "%s"}
          - {addr: 192.0.2.13}
`, a.check(), b.check())
	t0 := time.Unix(1_000_000, 0).UTC()
	clk := clock.NewManual(t0)
	s := startServer(t, parseConfig(t, yaml), Options{Clock: clk})
	type want struct {
		probed, up   bool
		since        time.Duration // after t0
		checked      time.Duration
		errorPresent bool
	}
	const iv = 3 * time.Second
	steps := []struct {
		name    string
		do      func()
		advance time.Duration
		a, b    want
	}{
		{"before the first round: up, not probed", nil, -1, want{}, want{}},
		{"first round: both up since it", nil, 0, want{true, true, 0, 0, false}, want{true, true, 0, 0, false}},
		{"b dies: down at the next round", b.kill, iv, want{true, true, 0, iv, false}, want{true, false, iv, iv, true}},
		{"another round: b still down since then", nil, iv, want{true, true, 0, 2 * iv, false}, want{true, false, iv, 2 * iv, true}},
	}
	for _, st := range steps {
		if st.do != nil {
			st.do()
		}
		if st.advance >= 0 {
			clk.Advance(st.advance)
		}
		rec := httptest.NewRecorder()
		s.HealthHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, NodeHealthPath, nil))
		var rep HealthReport
		if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil || rec.Code != http.StatusOK {
			t.Fatalf("%s: %d %s (%v)", st.name, rec.Code, rec.Body, err)
		}
		if len(rep.Nodes) != 3 || rep.Interval != iv {
			t.Fatalf("%s: %+v, want 3 nodes and the interval", st.name, rep)
		}
		if n := rep.Nodes[2]; n.Addr != "192.0.2.13" || n.Probed || !n.Up || n.Check != "" {
			t.Errorf("%s: the node without a check: %+v, want up and not probed", st.name, n)
		}
		for i, w := range []want{st.a, st.b} {
			n := rep.Nodes[i]
			var since, checked time.Time
			if w.probed {
				since, checked = t0.Add(w.since), t0.Add(w.checked)
			}
			if n.Domain != "api.example.test" || n.Probed != w.probed || n.Up != (w.up || !w.probed) || !n.Since.Equal(since) || !n.Checked.Equal(checked) || (n.Error != "") != w.errorPresent {
				t.Errorf("%s: node %d: %+v, want %+v", st.name, i, n, w)
			}
		}
	}
	rec := httptest.NewRecorder()
	s.HealthHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, NodeHealthPath, nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d, want 405", rec.Code)
	}
}
