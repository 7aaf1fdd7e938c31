package lastmile

import (
	"testing"
	"time"
)

func TestBrokenMemoryBackoff(t *testing.T) {
	b := newBrokenMemory(5*time.Minute, time.Hour)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const node = "192.0.2.1:443"
	// Step table: (time, event, network, expected broken duration or state).
	steps := []struct {
		at      time.Duration
		event   string // fail, succeed, check
		network uint64
		want    time.Duration // for fail: duration; for check: 1 = broken, 0 = not
	}{
		{0, "fail", 1, 5 * time.Minute},
		{time.Minute, "check", 1, 1},
		{time.Minute, "check", 2, 0}, // another network knows nothing
		{5 * time.Minute, "check", 1, 0},
		{5 * time.Minute, "fail", 1, 10 * time.Minute},
		{6 * time.Minute, "fail", 1, 20 * time.Minute},
		{7 * time.Minute, "fail", 1, 40 * time.Minute},
		{8 * time.Minute, "fail", 1, time.Hour}, // 80 min capped
		{9 * time.Minute, "fail", 1, time.Hour},
		{9 * time.Minute, "check", 1, 1},
		{10 * time.Minute, "succeed", 1, 0},
		{10 * time.Minute, "check", 1, 0},
		{11 * time.Minute, "fail", 1, 5 * time.Minute}, // count restarted
	}
	for i, s := range steps {
		now := t0.Add(s.at)
		switch s.event {
		case "fail":
			if got := b.fail(s.network, node, ProtocolH3, now); got != s.want {
				t.Fatalf("step %d: fail -> %v, want %v", i, got, s.want)
			}
		case "succeed":
			b.succeed(s.network, node, ProtocolH3)
		case "check":
			if got := b.broken(s.network, node, ProtocolH3, now); got != (s.want == 1) {
				t.Fatalf("step %d: broken = %v, want %v", i, got, s.want == 1)
			}
		}
	}
	b.fail(2, node, ProtocolTCP, t0)
	b.forget(2)
	if b.broken(1, node, ProtocolH3, t0.Add(12*time.Minute)) || !b.broken(2, node, ProtocolTCP, t0) {
		t.Fatal("forget kept the wrong network")
	}
}
