package lastmile

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/veerhq/veer/lastmile/lmtest"
)

// On a cold start (no cached schedule) the direct step races the
// scheduler's request: a scheduling service that hangs does not hold the
// first request, which the direct path serves; the chain does not run the
// direct step a second time.
func TestColdStartDirectRacesAHangingScheduler(t *testing.T) {
	w := newWorld(t)
	n := w.node(t, "n", lmtest.NodeOptions{})
	release := make(chan struct{})
	hang := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		http.Error(w, "late", http.StatusServiceUnavailable)
	})
	sn := w.node(t, "sched", lmtest.NodeOptions{Handler: hang})
	t.Cleanup(func() { close(release) }) // runs before the node closes
	tp := w.transport(t, Config{
		Steps:     []RouteStep{StepScheduler, StepDirect},
		Scheduler: SchedulerConfig{URL: "https://sched.test:" + strconv.Itoa(port(sn.Addr())) + "/v1/schedule", Timeout: 30 * time.Second},
	})
	tr := &Trace{}
	ctx, cancel := context.WithTimeout(WithTrace(context.Background(), tr), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.test:"+strconv.Itoa(port(n.Addr()))+"/", nil)
	resp, err := tp.RoundTrip(req)
	if err != nil {
		t.Fatalf("%v; trace %s", err, tr)
	}
	resp.Body.Close()
	if tr.Served != StepDirect || tr.Addr != n.Addr() {
		t.Fatalf("trace %s: want the direct step to serve", tr)
	}
}
