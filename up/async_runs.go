package up

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
)

// maxRuns bounds a backend's record of the async invocations it ran (the
// oldest are forgotten; a reader that asks for them is told so).
const maxRuns = 200_000

// Run is one async invocation a backend ran to completion.
type Run struct {
	Seq uint64 `json:"seq"`
	ID  string `json:"id"`
	Key string `json:"key,omitempty"`
}

// Runs is a backend's answer to GET PathRuns?after=SEQ: the runs after
// SEQ, oldest first. Boot changes when the backend process restarts (its
// record starts again at 1); Truncated says runs after SEQ were forgotten.
type Runs struct {
	Boot      string `json:"boot"`
	Last      uint64 `json:"last"`
	Truncated bool   `json:"truncated,omitempty"`
	Runs      []Run  `json:"runs"`
}

// runLog is a bounded, append-only record of runs (a ring).
type runLog struct {
	boot  string
	limit int
	mu    sync.Mutex
	buf   []Run
	next  int    // ring position of the next run
	last  uint64 // the last run's sequence number
}

func newRunLog(n int) *runLog {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return &runLog{boot: hex.EncodeToString(b), limit: max(n, 1), buf: make([]Run, 0, min(n, 1024))}
}

func (l *runLog) add(id, key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last++
	r := Run{Seq: l.last, ID: id, Key: key}
	if len(l.buf) < l.limit {
		l.buf = append(l.buf, r)
		return
	}
	l.buf[l.next] = r
	l.next = (l.next + 1) % len(l.buf)
}

func (l *runLog) since(after uint64) Runs {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := Runs{Boot: l.boot, Last: l.last, Runs: []Run{}}
	n := len(l.buf)
	if n == 0 || after >= l.last {
		return out
	}
	oldest := l.last - uint64(n) + 1
	if after+1 < oldest {
		out.Truncated = true
		after = oldest - 1
	}
	// the ring holds oldest..last starting at position next (once full)
	start := 0
	if n == l.limit {
		start = l.next
	}
	skip := int(after - oldest + 1)
	for i := skip; i < n; i++ {
		out.Runs = append(out.Runs, l.buf[(start+i)%n])
	}
	return out
}
