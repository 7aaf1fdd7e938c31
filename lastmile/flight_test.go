package lastmile

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/veerhq/veer/lastmile/lmtest"
	"github.com/veerhq/veer/outcome"
)

// A request whose deadline passes while the chain is still connecting to a
// blackholed node fails with a network kind (the host did not answer in
// time); only the caller's own cancel() is ClientCanceled. Both for the
// request that started the run and for one that joined it.
func TestDeadlineDuringChainIsANetworkFailure(t *testing.T) {
	for _, accept := range []bool{false, true} {
		w := newWorld(t)
		hole, err := lmtest.NewBlackhole(accept)
		must(t, err)
		t.Cleanup(func() { hole.Close() })
		tp := w.transport(t, Config{Steps: []RouteStep{StepDirect}, Race: RaceConfig{TCPDelay: 50 * time.Millisecond}})
		url := "https://api.test:" + strconv.Itoa(port(hole.Addr())) + "/"
		do := func(ctx context.Context) error {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			resp, err := tp.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
				return errors.New("a blackhole answered")
			}
			return err
		}
		for i := range 2 { // the first starts the run, the second joins it
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			err := do(ctx)
			cancel()
			if k := outcome.ClassifyError(err); k != outcome.DialCanceled || !k.Network() {
				t.Errorf("accept=%v request %d: deadline gave %v (%v), want dial_canceled", accept, i, k, err)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- do(ctx) }()
		cancel()
		if k := outcome.ClassifyError(<-errc); k != outcome.ClientCanceled {
			t.Errorf("accept=%v: cancel() gave %v, want client_canceled", accept, k)
		}
	}
}
