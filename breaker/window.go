package breaker

// window counts two quantities over a rolling window of n buckets of width
// nanoseconds each, keeping running sums so reading them is O(1).
type window struct {
	width int64
	b     []pair
	cur   int64 // bucket number (time / width) of the newest bucket
	sum   pair
}

type pair struct{ a, b int64 }

func newWindow(span int64, n int) window {
	w := span / int64(n)
	if w <= 0 {
		w = 1
	}
	return window{width: w, b: make([]pair, n)}
}

// advance moves the window to now (nanoseconds), expiring old buckets. A
// time before the newest bucket counts into the newest bucket.
func (w *window) advance(now int64) {
	e := now / w.width
	if e <= w.cur {
		return
	}
	n := int64(len(w.b))
	if e-w.cur >= n {
		clear(w.b)
		w.sum = pair{}
	} else {
		for i := w.cur + 1; i <= e; i++ {
			p := &w.b[i%n]
			w.sum.a -= p.a
			w.sum.b -= p.b
			*p = pair{}
		}
	}
	w.cur = e
}

func (w *window) add(a, b int64) {
	p := &w.b[w.cur%int64(len(w.b))]
	p.a += a
	p.b += b
	w.sum.a += a
	w.sum.b += b
}

func (w *window) reset() {
	clear(w.b)
	w.sum = pair{}
}
