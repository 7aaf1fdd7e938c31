package shed

// deque is a double-ended queue of waiters with lazy removal: a waiter that
// left (wGone) stays in the buffer until it reaches an end.
type deque struct {
	buf  []*waiter
	head int
	live int
}

func (d *deque) push(w *waiter) {
	if d.head > 0 && d.head >= len(d.buf)/2 {
		n := copy(d.buf, d.buf[d.head:])
		clear(d.buf[n:])
		d.buf = d.buf[:n]
		d.head = 0
	}
	d.buf = append(d.buf, w)
	d.live++
}

// front returns the oldest waiting waiter without removing it.
func (d *deque) front() *waiter {
	for d.head < len(d.buf) {
		w := d.buf[d.head]
		if w.state == wWaiting {
			return w
		}
		d.buf[d.head] = nil
		d.head++
	}
	return nil
}

func (d *deque) popFront() *waiter {
	w := d.front()
	if w == nil {
		return nil
	}
	d.buf[d.head] = nil
	d.head++
	d.live--
	return w
}

func (d *deque) popBack() *waiter {
	for len(d.buf) > d.head {
		w := d.buf[len(d.buf)-1]
		d.buf[len(d.buf)-1] = nil
		d.buf = d.buf[:len(d.buf)-1]
		if w.state == wWaiting {
			d.live--
			return w
		}
	}
	return nil
}
