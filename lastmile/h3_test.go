package lastmile

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/veerhq/veer/lastmile/lmtest"
	"github.com/veerhq/veer/outcome"
)

// An origin without QUIC (UDP port closed: the kernel answers QUIC with an
// ICMP port-unreachable) fails the QUIC attempt at once and TCP starts
// without waiting for tcp_delay (10 s here, longer than the request's 5 s
// deadline).
func TestQUICToClosedUDPPortFailsAtOnce(t *testing.T) {
	w := newWorld(t)
	n := w.node(t, "tcponly", lmtest.NodeOptions{NoQUIC: true})
	tp := w.transport(t, Config{Steps: []RouteStep{StepDirect}, Race: RaceConfig{TCPDelay: 10 * time.Second, ConnectTimeout: 20 * time.Second}})
	tr := &Trace{}
	ctx, cancel := context.WithTimeout(WithTrace(context.Background(), tr), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.test:"+strconv.Itoa(port(n.Addr()))+"/", nil)
	resp, err := tp.RoundTrip(req)
	if err != nil {
		t.Fatalf("%v; trace %s", err, tr)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "tcponly HTTP/2.0" {
		t.Fatalf("body %q", body)
	}
	if len(tr.Failures) != 1 || tr.Failures[0].Protocol != ProtocolH3 || tr.Failures[0].Kind != outcome.ConnectRefused || !errors.Is(tr.Failures[0].Err, ErrUDPRefused) {
		t.Fatalf("failures %v, want one h3 connect_refused (ErrUDPRefused)", tr.Failures)
	}
}
