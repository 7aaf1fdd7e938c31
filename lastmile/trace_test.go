package lastmile

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/veerhq/veer/lastmile/lmtest"
)

// A node skipped because every protocol to it was remembered broken, which
// then serves the request on the chain's last pass, is a skip, not a
// failure: the Trace lists it in Skipped, and its string says "skipped".
func TestTraceSkipIsNotAFailure(t *testing.T) {
	w := newWorld(t)
	n := w.node(t, "n", lmtest.NodeOptions{})
	tp := w.transport(t, Config{
		Steps:       []RouteStep{StepDirect},
		NoRouteHold: -1,
		Race:        RaceConfig{TCPDelay: time.Millisecond, ConnectTimeout: time.Second}, // a TLS handshake under -race on a busy machine took over 200 ms (CI)
	})
	url := "https://api.test:" + strconv.Itoa(port(n.Addr())) + "/"
	n.BlockTCP(true)
	n.BlockQUIC(true)
	if _, tr, err := get(t, tp, url); err == nil {
		t.Fatalf("dead node served: %s", tr)
	}
	n.BlockTCP(false)
	n.BlockQUIC(false)
	_, tr := mustGet(t, tp, url)
	if tr.Served != StepDirect || tr.Addr != n.Addr() {
		t.Fatalf("served by %s %s: %s", tr.Served, tr.Addr, tr)
	}
	for _, f := range tr.Failures {
		if errors.Is(f.Err, ErrSkippedBroken) {
			t.Errorf("skip recorded as a failure: %v", f)
		}
	}
	s := tr.String()
	if strings.Contains(s, "[direct "+n.Addr()+" network_other]") || !strings.Contains(s, "skipped[direct "+n.Addr()+" remembered_broken]") {
		t.Errorf("String() = %q: want the node shown as skipped, not failed", s)
	}
	if len(tr.Skipped) != 1 || tr.Skipped[0].Target != n.Addr() || !errors.Is(tr.Skipped[0].Reason, ErrSkippedBroken) {
		t.Errorf("Skipped = %v", tr.Skipped)
	}
}
