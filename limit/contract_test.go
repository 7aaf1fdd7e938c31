package limit_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/limit"
	"github.com/veerhq/veer/limit/limittest"
)

func TestContract(t *testing.T) {
	limittest.Contract(t, func(t *testing.T, cfg limit.Config) limit.Admitter {
		l, err := limit.New(cfg, limit.Options{Clock: clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), Registerer: prometheus.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		return l
	})
}
