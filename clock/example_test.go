package clock_test

import (
	"fmt"
	"time"

	"github.com/veerhq/veer/clock"
)

// A Manual clock moves only when told to; timers fire in order, on the
// caller's goroutine.
func ExampleManual() {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := clock.NewManual(start)
	m.AfterFunc(2*time.Second, func() { fmt.Println("second timer at", m.Since(start)) })
	m.AfterFunc(time.Second, func() { fmt.Println("first timer at", m.Since(start)) })
	next, _ := m.Next()
	fmt.Println("next due at", next.Sub(start))
	m.Advance(5 * time.Second)
	fmt.Println("now", m.Since(start))
	// Output:
	// next due at 1s
	// first timer at 1s
	// second timer at 2s
	// now 5s
}
