//go:build unix

package runq

import (
	"runtime"
	"testing"
)

// TestPollYieldPipeWaker runs the yield on the pipe waker that Unix systems
// without an eventfd use, here too: every yield waits for a poll, and a
// goroutine the poll wakes runs first (the pipe is drained at each wake, so
// the next ring is an edge again).
func TestPollYieldPipeWaker(t *testing.T) {
	w := newPipeWaker()
	if w == nil {
		t.Fatal("no pipe waker")
	}
	wakerOnce.Do(func() { theWaker = newWaker() })
	yieldMu.Lock() // no leader now: swap the waker under the leaders' lock
	saved := theWaker
	theWaker = w
	yieldMu.Unlock()
	defer func() {
		yieldMu.Lock()
		theWaker = saved
		yieldMu.Unlock()
		runtime.KeepAlive(w)
	}()
	everyYieldPolls(t, 200)
	TestPollYieldRunsNetworkWokenFirst(t)
}
