package clock

import (
	"reflect"
	"testing"
	"testing/synctest"
	"time"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestManualFiresInDeadlineThenCreationOrder(t *testing.T) {
	m := NewManual(epoch)
	var got []string
	rec := func(s string) func() { return func() { got = append(got, s+"@"+m.Since(epoch).String()) } }
	m.AfterFunc(3*time.Second, rec("c"))
	m.AfterFunc(time.Second, rec("a1"))
	m.AfterFunc(time.Second, rec("a2")) // same instant: creation order
	m.AfterFunc(2*time.Second, rec("b"))
	m.AfterFunc(10*time.Second, rec("late"))

	m.Advance(3 * time.Second)
	want := []string{"a1@1s", "a2@1s", "b@2s", "c@3s"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
	if d := m.Since(epoch); d != 3*time.Second {
		t.Fatalf("time after Advance = %v, want 3s", d)
	}
	if next, ok := m.Next(); !ok || !next.Equal(epoch.Add(10*time.Second)) {
		t.Fatalf("Next() = %v, %v; want +10s, true", next, ok)
	}
}

func TestManualStopAndReset(t *testing.T) {
	m := NewManual(epoch)
	fired := 0
	tm := m.AfterFunc(time.Second, func() { fired++ })
	if !tm.Stop() {
		t.Fatal("Stop of a pending timer reported false")
	}
	if tm.Stop() {
		t.Fatal("second Stop reported true")
	}
	m.Advance(2 * time.Second)
	if fired != 0 {
		t.Fatal("stopped timer fired")
	}
	if tm.Reset(time.Second) {
		t.Fatal("Reset of a stopped timer reported it active")
	}
	m.Advance(999 * time.Millisecond)
	if fired != 0 {
		t.Fatal("reset timer fired early")
	}
	m.Advance(time.Millisecond)
	if fired != 1 {
		t.Fatalf("reset timer fired %d times, want 1", fired)
	}
	if m.Pending() != 0 {
		t.Fatalf("Pending() = %d after all fired", m.Pending())
	}
}

func TestManualResetReordersSameInstant(t *testing.T) {
	m := NewManual(epoch)
	var got []string
	a := m.AfterFunc(time.Second, func() { got = append(got, "a") })
	m.AfterFunc(time.Second, func() { got = append(got, "b") })
	a.Reset(time.Second) // rescheduled later: now after b at the same instant
	m.Advance(time.Second)
	if want := []string{"b", "a"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}

func TestManualCallbacksCanScheduleDuringAdvance(t *testing.T) {
	m := NewManual(epoch)
	var at []time.Duration
	var tick func()
	tick = func() {
		at = append(at, m.Since(epoch))
		if len(at) < 5 {
			m.AfterFunc(time.Second, tick)
		}
	}
	m.AfterFunc(time.Second, tick)
	m.Advance(time.Minute)
	want := []time.Duration{1 * time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second, 5 * time.Second}
	if !reflect.DeepEqual(at, want) {
		t.Fatalf("chained timers fired at %v, want %v", at, want)
	}
}

func TestManualStep(t *testing.T) {
	m := NewManual(epoch)
	if m.Step() {
		t.Fatal("Step with no timers reported true")
	}
	n := 0
	m.AfterFunc(5*time.Second, func() { n++ })
	m.AfterFunc(5*time.Second, func() { n++ })
	if !m.Step() || n != 1 || m.Since(epoch) != 5*time.Second {
		t.Fatalf("after one Step: n=%d time=%v", n, m.Since(epoch))
	}
	if !m.Step() || n != 2 {
		t.Fatalf("after two Steps: n=%d", n)
	}
}

func TestManualRunUntilPastDoesNotRewind(t *testing.T) {
	m := NewManual(epoch)
	m.Advance(time.Hour)
	m.RunUntil(epoch)
	if m.Since(epoch) != time.Hour {
		t.Fatalf("RunUntil the past moved time to %v", m.Since(epoch))
	}
	m.RunUntil(epoch.Add(2 * time.Hour))
	if m.Since(epoch) != 2*time.Hour {
		t.Fatalf("RunUntil = %v, want 2h", m.Since(epoch))
	}
}

func TestManualTimerAndTickerChannels(t *testing.T) {
	m := NewManual(epoch)
	tm := m.NewTimer(time.Second)
	tk := m.NewTicker(time.Second)
	m.Advance(time.Second)
	select {
	case v := <-tm.C():
		if !v.Equal(epoch.Add(time.Second)) {
			t.Fatalf("timer sent %v", v)
		}
	default:
		t.Fatal("timer did not fire")
	}
	<-tk.C()
	m.Advance(3 * time.Second) // three ticks, one-slot buffer: one waits
	select {
	case v := <-tk.C():
		if !v.Equal(epoch.Add(2 * time.Second)) {
			t.Fatalf("first buffered tick at %v, want +2s (later ones dropped)", v)
		}
	default:
		t.Fatal("ticker did not tick")
	}
	select {
	case v := <-tk.C():
		t.Fatalf("unexpected second buffered tick %v", v)
	default:
	}
	tk.Reset(10 * time.Second)
	m.Advance(9 * time.Second)
	select {
	case <-tk.C():
		t.Fatal("ticker ticked before its new period")
	default:
	}
	tk.Stop()
	m.Advance(time.Hour)
	select {
	case <-tk.C():
		t.Fatal("stopped ticker ticked")
	default:
	}
}

func TestManualDeterministic(t *testing.T) {
	run := func() []int {
		m := NewManual(epoch)
		var order []int
		for i := range 1000 {
			i := i
			m.AfterFunc(time.Duration(i*7919%97)*time.Millisecond, func() { order = append(order, i) })
		}
		m.Advance(time.Second)
		return order
	}
	a, b := run(), run()
	if !reflect.DeepEqual(a, b) || len(a) != 1000 {
		t.Fatal("two identical runs fired timers in different orders")
	}
}

func TestRealClockInBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := Real.Now()
		done := make(chan struct{})
		Real.AfterFunc(time.Minute, func() { close(done) })
		<-done
		if d := Real.Since(start); d != time.Minute {
			t.Fatalf("AfterFunc(1m) fired after %v of bubble time", d)
		}
		tm := Real.NewTimer(time.Second)
		<-tm.C()
		tk := Real.NewTicker(time.Second)
		<-tk.C()
		tk.Stop()
		if Or(nil) != Real {
			t.Fatal("Or(nil) is not Real")
		}
	})
}

func BenchmarkManualTimerEvents(b *testing.B) {
	m := NewManual(epoch)
	var f func()
	f = func() { m.AfterFunc(time.Millisecond, f) }
	for range 1024 { // a realistic number of pending timers
		m.AfterFunc(time.Duration(1+len(m.heap))*time.Microsecond, f)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		m.Step()
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
