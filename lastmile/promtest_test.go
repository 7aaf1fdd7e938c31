package lastmile

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/internal/metrictest"
)

// testutilCount returns the value of the counter name with labels.
func testutilCount(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	return metrictest.Sum(t, g, name, labels)
}
