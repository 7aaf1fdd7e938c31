package control_test

import (
	"crypto/ed25519"
	"fmt"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/veerhq/veer/control"
	"github.com/veerhq/veer/control/controltest"
)

// BenchmarkDecide measures rule evaluation on the compiled snapshot
// (answers encoded on first use, so the loop measures the lookup; the
// per-request signature is BenchmarkSignedBody's).
func BenchmarkDecide(b *testing.B) {
	t, lists := controltest.BigTable()
	if err := t.Validate(); err != nil {
		b.Fatal(err)
	}
	s := control.CompileLists(t, &control.State{}, &control.Emergency{}, lists, 1, benchKey(b))
	ids := make([]string, 4096)
	for i := range ids {
		if i%10 == 0 {
			ids[i] = fmt.Sprintf("wl-%d-%d", i%50, i%2000)
		} else {
			ids[i] = fmt.Sprint("device-", i)
		}
	}
	addrs := []netip.Addr{netip.MustParseAddr("10.3.1.1"), netip.MustParseAddr("203.0.113.1"), netip.MustParseAddr("172.16.19.4")}
	for i := range ids {
		s.Decide(addrs[i%3], ids[i], "")
	}
	b.ReportAllocs()
	b.ResetTimer()
	c0 := cpuTime()
	i := 0
	for b.Loop() {
		s.Decide(addrs[i%3], ids[i&4095], "")
		i++
	}
	// CPU time of the process per decision: on a shared machine the
	// wall-clock ns/op includes time the benchmark was not running.
	b.ReportMetric(float64(cpuTime()-c0)/float64(b.N), "cpu-ns/op")
}

func cpuTime() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func TestBigTableDecideAllocatesNothing(t *testing.T) {
	t0, lists := controltest.BigTable()
	s := control.CompileLists(t0, &control.State{}, &control.Emergency{}, lists, 1, benchKey(t))
	a := netip.MustParseAddr("10.3.1.1")
	if r := s.Decide(a, "wl-7-5", "").Rule; r != "whitelist:wl7" {
		t.Fatalf("wl-7-5 decided by %s", r)
	}
	s.Decide(a, "device-1", "")
	if n := testing.AllocsPerRun(1000, func() { s.Decide(a, "wl-7-5", ""); s.Decide(a, "device-1", "") }); n != 0 {
		t.Fatalf("%v allocations per decision", n)
	}
	buf := make([]byte, 0, 1024)
	now := time.Now()
	if n := testing.AllocsPerRun(100, func() { buf = s.AppendBody(buf[:0], a, "device-1", "", now) }); n != 0 {
		t.Fatalf("%v allocations per signed body", n)
	}
}

// BenchmarkSignedBody is the per-request cost of an answer: the decision
// and one Ed25519 signature over the answer bound to the device and time.
func BenchmarkSignedBody(b *testing.B) {
	t, lists := controltest.BigTable()
	s := control.CompileLists(t, &control.State{}, &control.Emergency{}, lists, 1, benchKey(b))
	a := netip.MustParseAddr("10.3.1.1")
	buf := make([]byte, 0, 1024)
	now := time.Now()
	b.ReportAllocs()
	c0 := cpuTime()
	i := 0
	for b.Loop() {
		buf = s.AppendBody(buf[:0], a, fmt.Sprint("device-", i&4095), "", now)
		i++
	}
	b.ReportMetric(float64(cpuTime()-c0)/float64(b.N), "cpu-ns/op")
}

func benchKey(t testing.TB) ed25519.PrivateKey {
	_, k, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
