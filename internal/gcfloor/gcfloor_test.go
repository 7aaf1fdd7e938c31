package gcfloor

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, floor uint64
		want        int
	}{
		{0, 32 * mib, 100},           // no collection yet
		{8 * mib, 32 * mib, 300},     // goal 8 × 4 = 32 MiB
		{10 * mib, 30*mib + 10, 200}, // rounded down
		{16 * mib, 32 * mib, 100},    // twice the live heap is the floor
		{100 * mib, 32 * mib, 100},   // over the floor: GOGC's own
		{16*mib - 1, 32 * mib, 100},  // just under half the floor
		{3 * mib, 0, 100},            // no floor
		// the runtime's minimum goal, 4 MiB × percent/100, stays under the floor
		{3 * mib, 16 * mib, 400}, // 433 would make that minimum 17.3 MiB
		{3 * mib, 32 * mib, 800}, // 966: 38.6 MiB
		{1024, 32 * mib, 800},    // a tiny live heap
		{3 * mib, 4 * mib, 100},  // the floor is the minimum itself: never under 100
		{1 * mib, 6 * mib, 150},  // (6-1)/1 = 500, bounded by 6/4
	} {
		if got := Percent(c.live, c.floor); got != c.want {
			t.Errorf("Percent(%d, %d) = %d, want %d", c.live, c.floor, got, c.want)
		}
	}
}

// The tuner sets the percent the live heap calls for after each
// collection, only when it changes, and restores the first percent when
// stopped; nothing after that.
func TestTunerSteps(t *testing.T) {
	const mib = 1 << 20
	live := uint64(0)
	cur := 150 // the percent before the tuner
	var sets []int
	tu := &tuner{floor: 32 * mib, read: func() uint64 { return live }, set: func(p int) int {
		old := cur
		cur = p
		sets = append(sets, p)
		return old
	}}
	tu.prev = 150
	steps := []struct {
		name string
		live uint64
		stop bool
		want []int // percents set by the step
	}{
		{"no collection yet", 0, false, []int{100}},
		{"small heap", 3 * mib, false, []int{800}},
		{"same heap: nothing", 3 * mib, false, nil},
		{"grown", 8 * mib, false, []int{300}},
		{"over half the floor", 20 * mib, false, []int{100}},
		{"stopped: the first percent back", 3 * mib, true, []int{150}},
		{"after stop: nothing", 1 * mib, false, nil},
	}
	for _, s := range steps {
		sets = nil
		live = s.live
		if s.stop {
			tu.stop()
		} else {
			tu.adjust()
		}
		if len(sets) != len(s.want) || len(sets) > 0 && sets[0] != s.want[0] {
			t.Fatalf("%s: set %v, want %v", s.name, sets, s.want)
		}
	}
}

// With the real collector: after a collection of this test's small heap
// the percent is raised, and after one with a live heap over half the
// floor it is 100 again.
func TestTunerFollowsCollections(t *testing.T) {
	const floor = 64 << 20
	adjusted := make(chan int, 64)
	tu := &tuner{floor: floor, read: readLive, set: debug.SetGCPercent, after: func(p int) {
		select {
		case adjusted <- p:
		default:
		}
	}}
	tu.run()
	defer tu.stop()
	wait := func(want func(int) bool) int {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			runtime.GC()
			select {
			case p := <-adjusted:
				if want(p) {
					return p
				}
			case <-deadline:
				t.Fatal("no adjustment after the collections")
			}
		}
	}
	if p := wait(func(p int) bool { return p > 100 }); p <= 100 {
		t.Fatalf("small heap: percent %d", p)
	}
	if got := currentPercent(); got <= 100 {
		t.Fatalf("the runtime's percent is %d", got)
	}
	ballast := make([]*[1 << 20]byte, 40) // 40 MiB live: over half the floor
	for i := range ballast {
		ballast[i] = new([1 << 20]byte)
	}
	wait(func(p int) bool { return p == 100 })
	if got := currentPercent(); got != 100 {
		t.Fatalf("large heap: the runtime's percent is %d", got)
	}
	runtime.KeepAlive(ballast)
}

func currentPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// The operator's GOGC or GOMEMLIMIT stands.
func TestStartOff(t *testing.T) {
	before := currentPercent()
	t.Setenv("GOGC", "200")
	stop, off := Start(DefaultFloor)
	defer stop()
	if off != "GOGC is set" {
		t.Fatalf("off = %q", off)
	}
	runtime.GC()
	if got := currentPercent(); got != before {
		t.Fatalf("percent %d, was %d", got, before)
	}
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "1GiB")
	if _, off := Start(DefaultFloor); off != "GOMEMLIMIT is set" {
		t.Fatalf("off = %q", off)
	}
	if _, off := Start(0); off != "floor 0" {
		t.Fatalf("off = %q", off)
	}
}
