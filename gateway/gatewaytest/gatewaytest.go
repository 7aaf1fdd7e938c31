// Package gatewaytest starts a gateway for a test and stops it when the test
// ends: the one place tests across packages do New, Start and a bounded
// Shutdown.
package gatewaytest

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/gateway"
	"github.com/veerhq/veer/obs"
)

// Start builds and starts a gateway from cfg and opts (a discarding logger
// and a fresh registry unless set) and shuts it down, bounded by 5 s, when
// the test ends. Any error fails the test.
func Start(t testing.TB, cfg gateway.Config, opts gateway.Options) *gateway.Gateway {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = obs.Discard
	}
	if opts.Registerer == nil {
		opts.Registerer = prometheus.NewRegistry()
	}
	g, err := gateway.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = g.Shutdown(ctx)
	})
	return g
}
