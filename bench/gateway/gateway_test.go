package gateway

import (
	"os"
	"testing"
	"time"
)

func TestProcReadings(t *testing.T) {
	end := time.Now().Add(50 * time.Millisecond)
	for time.Now().Before(end) { // burn some CPU to read back
	}
	if c := CPUSeconds(os.Getpid()); c <= 0 {
		t.Errorf("CPU seconds of this process: %v", c)
	}
	if r := RSSBytes(os.Getpid()); r < 1<<20 {
		t.Errorf("RSS of this process: %d", r)
	}
}

func TestQuantile(t *testing.T) {
	r := Result{Latencies: []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}
	if r.Quantile(0.5) != 6 || r.Quantile(0.99) != 10 || (Result{}).Quantile(0.5) != 0 {
		t.Errorf("quantiles %v %v", r.Quantile(0.5), r.Quantile(0.99))
	}
}
