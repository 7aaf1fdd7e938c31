package shed

import (
	"crypto/sha256"
	"fmt"
	"math"
	"net/http"
	"time"
)

// HandlerConfig describes the work of the system under test.
type HandlerConfig struct {
	// Kind is "cpu" (a fixed amount of CPU work per request) or "dep" (a
	// slow dependency: Slots concurrent slots, each held for Sleep).
	Kind string
	// Iters is the number of hash rounds of a cpu request (see Calibrate).
	Iters int
	// Slots and Sleep model the dependency of a dep request.
	Slots int
	Sleep time.Duration
	// Paths are the routes served ("GET /a" style patterns).
	Paths []string
}

// Calibrate returns the number of hash rounds that take about d of CPU on
// this goroutine, so that a cpu handler does a fixed amount of work whatever
// the concurrency (spinning on the wall clock would not).
// It keeps the fastest of several probes, as other processes on a shared
// machine can only make a probe slower.
func Calibrate(d time.Duration) int {
	const probe = 5000
	best := time.Duration(math.MaxInt64)
	for range 7 {
		start := time.Now()
		_ = work(probe)
		best = min(best, time.Since(start))
	}
	return max(1, int(float64(probe)*float64(d)/float64(best)))
}

func work(iters int) byte {
	var sum [32]byte
	for range iters {
		sum = sha256.Sum256(sum[:])
	}
	return sum[0]
}

// NewMux returns the server's routes for c.
func NewMux(c HandlerConfig) (*http.ServeMux, error) {
	return NewTracedMux(c, nil)
}

// NewTracedMux is NewMux with the application handler timed by t (nil: not
// traced).
func NewTracedMux(c HandlerConfig, t *Tracer) (*http.ServeMux, error) {
	var h http.Handler
	switch c.Kind {
	case "cpu":
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "%d\n", work(c.Iters))
		})
	case "dep":
		slots := make(chan struct{}, c.Slots)
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			slots <- struct{}{}
			time.Sleep(c.Sleep)
			<-slots
			fmt.Fprintln(w, "ok")
		})
	default:
		return nil, fmt.Errorf("handler kind %q: want cpu or dep", c.Kind)
	}
	if t != nil {
		h = t.Inner(h)
	}
	mux := http.NewServeMux()
	for _, p := range c.Paths {
		mux.Handle(p, h)
	}
	return mux, nil
}
