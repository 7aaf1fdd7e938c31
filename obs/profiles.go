package obs

import (
	"fmt"
	"net/http"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"
)

// MaxProfileSeconds bounds a CPU profile's ?seconds= in Profiles.
const MaxProfileSeconds = 60

// Profiles serves the Go runtime's profiles in pprof's format, for a
// service's admin listener (mounted at a path ending in "/", e.g.
// "/debug/pprof/"): GET PREFIX lists them; PREFIX{name} writes one (heap,
// allocs, goroutine, block, mutex, threadcreate; ?debug=1 or 2 for text,
// ?gc=1 runs a GC before a heap profile); PREFIX+"profile?seconds=N"
// records the CPU for N seconds (default 30, at most MaxProfileSeconds).
// `go tool pprof http://ADMIN/debug/pprof/heap` reads them.
//
// Unlike importing net/http/pprof, it registers nothing on
// http.DefaultServeMux: a library that mounts it decides where it is
// served and behind which check.
func Profiles() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := strings.LastIndexByte(r.URL.Path, '/')
		name := r.URL.Path[i+1:]
		q := r.URL.Query()
		switch name {
		case "":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			for _, p := range pprof.Profiles() {
				fmt.Fprintf(w, "%s %d\n", p.Name(), p.Count())
			}
			fmt.Fprintln(w, "profile (CPU, ?seconds=N)")
		case "profile":
			secs := 30
			if v := q.Get("seconds"); v != "" {
				n, err := strconv.Atoi(v)
				if err != nil || n < 1 || n > MaxProfileSeconds {
					http.Error(w, fmt.Sprintf("seconds: want 1 to %d, got %q", MaxProfileSeconds, v), http.StatusBadRequest)
					return
				}
				secs = n
			}
			w.Header().Set("Content-Type", "application/octet-stream")
			if err := pprof.StartCPUProfile(w); err != nil {
				http.Error(w, "CPU profile: "+err.Error(), http.StatusConflict) // one at a time
				return
			}
			t := time.NewTimer(time.Duration(secs) * time.Second)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
			}
			pprof.StopCPUProfile()
		default:
			p := pprof.Lookup(name)
			if p == nil {
				http.Error(w, "no profile "+strconv.Quote(name), http.StatusNotFound)
				return
			}
			debug, _ := strconv.Atoi(q.Get("debug"))
			if name == "heap" && q.Get("gc") == "1" {
				runtime.GC()
			}
			if debug > 0 {
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			} else {
				w.Header().Set("Content-Type", "application/octet-stream")
			}
			_ = p.WriteTo(w, debug)
		}
	})
}
