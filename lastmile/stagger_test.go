package lastmile

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/veerhq/veer/lastmile/lmtest"
)

// Happy eyeballs across a step's nodes: the first node blackholes (SYNs
// dropped, QUIC swallowed) and its attempt would run for the 10 s connect
// timeout; the second node starts after the 100 ms stagger and serves the
// request well inside its 3 s deadline.
func TestStaggeredNodesPassABlackhole(t *testing.T) {
	w := newWorld(t)
	hole, err := lmtest.NewBlackhole(false)
	must(t, err)
	t.Cleanup(func() { hole.Close() })
	good := w.node(t, "good", lmtest.NodeOptions{})
	tp := w.transport(t, Config{
		Steps:       []RouteStep{StepFallbackIP},
		Stagger:     100 * time.Millisecond,
		FallbackIPs: []FallbackIP{{Addr: hole.Addr()}, {Addr: good.Addr()}},
		Race:        RaceConfig{ConnectTimeout: 10 * time.Second},
	})
	tr := &Trace{}
	ctx, cancel := context.WithTimeout(WithTrace(context.Background(), tr), 3*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.test:"+strconv.Itoa(port(good.Addr()))+"/", nil)
	resp, err := tp.RoundTrip(req)
	if err != nil {
		t.Fatalf("%v; trace %s", err, tr)
	}
	resp.Body.Close()
	if tr.Addr != good.Addr() {
		t.Fatalf("served by %s, want the second node: %s", tr.Addr, tr)
	}
}

// Happy eyeballs across route steps: the direct step's node blackholes;
// the fallback IP step starts after the stagger and serves.
func TestStaggeredStepsPassABlackhole(t *testing.T) {
	w := newWorld(t)
	hole, err := lmtest.NewBlackhole(true)
	must(t, err)
	t.Cleanup(func() { hole.Close() })
	lb := w.node(t, "lb", lmtest.NodeOptions{})
	tp := w.transport(t, Config{
		Steps:       []RouteStep{StepDirect, StepFallbackIP},
		Stagger:     100 * time.Millisecond,
		FallbackIPs: []FallbackIP{{Addr: lb.Addr()}},
		Race:        RaceConfig{ConnectTimeout: 10 * time.Second},
	})
	tr := &Trace{}
	ctx, cancel := context.WithTimeout(WithTrace(context.Background(), tr), 3*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.test:"+strconv.Itoa(port(hole.Addr()))+"/", nil)
	resp, err := tp.RoundTrip(req)
	if err != nil {
		t.Fatalf("%v; trace %s", err, tr)
	}
	resp.Body.Close()
	if tr.Served != StepFallbackIP {
		t.Fatalf("trace %s: want fallback_ip", tr)
	}
}
