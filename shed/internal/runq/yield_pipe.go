//go:build unix && !linux

package runq

// newWaker is a pipe where there is no eventfd (newPipeWaker).
func newWaker() *waker { return newPipeWaker() }
