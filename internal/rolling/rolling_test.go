package rolling

import (
	"fmt"
	"testing"
	"time"
)

// TestWindowSteps: a 10-nanosecond window of 5 buckets, 2 ns each, driven
// by explicit times.
func TestWindowSteps(t *testing.T) {
	w := New(10, 5)
	steps := []struct {
		now      int64
		a, b     int64 // added after advancing
		moved    bool  // Advance's answer
		wantA    int64 // sums after the step
		wantB    int64
		describe string
	}{
		{0, 1, 0, false, 1, 0, "first bucket"},
		{1, 0, 1, false, 1, 1, "same bucket"},
		{2, 2, 0, true, 3, 1, "second bucket"},
		{1, 1, 0, false, 4, 1, "an earlier time counts into the newest bucket"},
		{9, 0, 2, true, 4, 3, "fifth bucket: nothing expired yet"},
		{10, 0, 0, true, 3, 2, "sixth bucket expires the first, which held {1 1}"},
	}
	for i, s := range steps {
		if got := w.Advance(s.now); got != s.moved {
			t.Errorf("step %d (%s): Advance(%d) = %v, want %v", i, s.describe, s.now, got, s.moved)
		}
		w.Add(s.a, s.b)
		if got := w.Sum(); got != (Pair{s.wantA, s.wantB}) {
			t.Errorf("step %d (%s): Sum = %+v, want {%d %d}", i, s.describe, got, s.wantA, s.wantB)
		}
	}
	if !w.Advance(100) || w.Sum() != (Pair{}) {
		t.Errorf("a jump of a whole span left %+v", w.Sum())
	}
	w.Add(5, 5)
	w.Reset()
	if w.Sum() != (Pair{}) {
		t.Errorf("Reset left %+v", w.Sum())
	}
}

func TestNewBounds(t *testing.T) {
	for _, tt := range []struct {
		span    time.Duration
		buckets int
		want    time.Duration
		n       int
	}{
		{time.Second, 10, time.Second, 10},
		{3, 10, 10, 10}, // buckets are at least 1 ns wide
		{time.Second, 0, time.Second, 1},
	} {
		w := New(tt.span, tt.buckets)
		if w.Span() != tt.want || w.Buckets() != tt.n {
			t.Errorf("New(%v, %d): %v in %d buckets, want %v in %d", tt.span, tt.buckets, w.Span(), w.Buckets(), tt.want, tt.n)
		}
		w.Advance(int64(time.Hour)) // must not divide by zero
	}
}

func TestAddDoesNotAllocate(t *testing.T) {
	w := New(time.Second, 10)
	now := int64(0)
	if n := testing.AllocsPerRun(100, func() {
		now += int64(time.Millisecond)
		w.Advance(now)
		w.Add(1, 1)
		_ = w.Sum()
	}); n != 0 {
		t.Fatalf("%v allocations per count", n)
	}
}

func ExampleWindow() {
	w := New(10*time.Second, 10) // ten buckets of a second
	sec := int64(time.Second)
	w.Add(3, 1) // at 0 s: 3 successes, 1 failure
	w.Advance(5 * sec)
	w.Add(1, 1)
	fmt.Println(w.Sum())
	w.Advance(12 * sec) // the buckets of 0-2 s expired
	fmt.Println(w.Sum())
	// Output:
	// {4 2}
	// {1 1}
}
