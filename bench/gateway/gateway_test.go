package gateway

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// TestProcReadings reads this process's CPU time and resident set from
// /proc. CPU time there counts in clock ticks (10 ms) of time actually run,
// so a fixed span of wall time may show none on a busy machine: the test
// burns CPU until the reading advances (bounded), and checks it against
// the kernel's own account (getrusage) within a tick.
func TestProcReadings(t *testing.T) {
	c0 := CPUSeconds(os.Getpid())
	deadline := time.Now().Add(time.Minute)
	c1 := c0
	for c1 <= c0 && time.Now().Before(deadline) {
		for range 1 << 16 { // burn a little CPU between reads
			sink++
		}
		c1 = CPUSeconds(os.Getpid())
	}
	if c1 <= c0 {
		t.Fatalf("CPU seconds of this process stayed %v for a minute of burning", c0)
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	self := time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	if c1 > self+2.0/clkTck {
		t.Errorf("CPU seconds %v from /proc, more than the %v getrusage counts", c1, self)
	}
	if r := RSSBytes(os.Getpid()); r < 1<<20 {
		t.Errorf("RSS of this process: %d", r)
	}
}

var sink int

func TestQuantile(t *testing.T) {
	r := Result{Latencies: []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}
	if r.Quantile(0.5) != 6 || r.Quantile(0.99) != 10 || (Result{}).Quantile(0.5) != 0 {
		t.Errorf("quantiles %v %v", r.Quantile(0.5), r.Quantile(0.99))
	}
}
