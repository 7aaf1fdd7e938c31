package shed

import (
	"fmt"
	"net/http"
	"os"
	"runtime/trace"
	"strings"
	"sync"
	"time"
)

// IDHeader carries a request's id (its stream and intended send time) from
// the generator to a tracing server, so that client and server timings of
// one request can be joined.
const IDHeader = "Shedbench-Id"

// Tracer records, per request, when the server's outermost handler was
// entered, when the application handler started and when it returned (unix
// ns; client and server share the machine's clock). It is a diagnostic:
// SHEDBENCH_SAMPLES turns it on.
type Tracer struct {
	mu   sync.Mutex
	recs map[string]*traceRec
}

type traceRec struct{ entry, start, end int64 }

// NewTracer returns an empty tracer.
func NewTracer() *Tracer { return &Tracer{recs: map[string]*traceRec{}} }

func (t *Tracer) rec(r *http.Request) *traceRec {
	id := r.Header.Get(IDHeader)
	if t == nil || id == "" {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	x := t.recs[id]
	if x == nil {
		x = &traceRec{}
		t.recs[id] = x
	}
	return x
}

// Outer wraps the server's outermost handler (before any contender).
func (t *Tracer) Outer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if x := t.rec(r); x != nil {
			x.entry = time.Now().UnixNano()
			logTrace(r, "entry")
		}
		next.ServeHTTP(w, r)
	})
}

// Inner wraps the application handler.
func (t *Tracer) Inner(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		x := t.rec(r)
		if x != nil {
			x.start = time.Now().UnixNano()
			logTrace(r, "start")
		}
		next.ServeHTTP(w, r)
		if x != nil {
			x.end = time.Now().UnixNano()
			logTrace(r, "end")
		}
	})
}

// logTrace marks a traced request's step in the runtime execution trace,
// if one is being taken (SHEDBENCH_PHASETRACE), so that a request's
// goroutine can be found in it.
func logTrace(r *http.Request, step string) {
	if trace.IsEnabled() {
		trace.Log(r.Context(), step, r.Header.Get(IDHeader))
	}
}

// WriteFile writes the records as CSV: id, entry, start, end.
func (t *Tracer) WriteFile(path string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b strings.Builder
	b.WriteString("id,entry_ns,start_ns,end_ns\n")
	for id, x := range t.recs {
		fmt.Fprintf(&b, "%s,%d,%d,%d\n", id, x.entry, x.start, x.end)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
