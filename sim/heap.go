package sim

import "github.com/veerhq/veer/outcome"

// event is a pending event of one session's run: a regular request or a
// canary completing, or the policy's wake-up.
type event struct {
	t      int64
	seq    uint64
	kind   eventKind
	domain int8
	out    outcome.Kind
	gen    uint32 // the wake generation, or the app launch of a completion
}

type eventKind uint8

const (
	evRequestDone eventKind = iota + 1
	evCanaryDone
	evWake
)

// eventHeap is a binary min-heap ordered by (t, seq): events due at the
// same instant run in the order they were scheduled, so runs are
// deterministic. It holds values, so pushing allocates only when it grows.
type eventHeap struct {
	ev  []event
	seq uint64
}

func (h *eventHeap) len() int { return len(h.ev) }

func (h *eventHeap) reset() { h.ev = h.ev[:0]; h.seq = 0 }

func less(a, b *event) bool { return a.t < b.t || a.t == b.t && a.seq < b.seq }

func (h *eventHeap) push(e event) {
	h.seq++
	e.seq = h.seq
	h.ev = append(h.ev, e)
	i := len(h.ev) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !less(&h.ev[i], &h.ev[p]) {
			break
		}
		h.ev[i], h.ev[p] = h.ev[p], h.ev[i]
		i = p
	}
}

// top returns the earliest event; the heap must not be empty.
func (h *eventHeap) top() *event { return &h.ev[0] }

func (h *eventHeap) pop() event {
	e := h.ev[0]
	n := len(h.ev) - 1
	h.ev[0] = h.ev[n]
	h.ev = h.ev[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && less(&h.ev[r], &h.ev[l]) {
			m = r
		}
		if !less(&h.ev[m], &h.ev[i]) {
			break
		}
		h.ev[i], h.ev[m] = h.ev[m], h.ev[i]
		i = m
	}
	return e
}
