//go:build unix

package runq

import (
	"os"
	"sync"
	"syscall"
)

// waker is the descriptor a leader of Yield waits on: rc reads it
// through the runtime's network poller; ring makes it readable (one
// edge-triggered event), drain consumes what ring wrote, if it must. keep
// holds the files, whose finalizers would close the descriptors.
type waker struct {
	rc    syscall.RawConn
	ring  func(rfd uintptr) error
	drain func(rfd uintptr)
	keep  []*os.File
}

var (
	wakerOnce sync.Once
	theWaker  *waker // nil: none could be made or polled, Yield is runtime.Gosched
)

// lead is the state of the one leader waiting at a time (Yield's
// yieldPending serialises them), kept outside waitPoll so that the read's
// callback is a package function and a wait allocates nothing.
var lead struct {
	w     *waker
	rang  bool
	err   error
	woken bool
}

// leadRead is the callback of the leader's read: the first call rings and
// asks the poller to wait (false); the next, once the poller has reported
// the descriptor readable, drains it and ends the read. The ring is inside
// the read, after the runtime reset the descriptor's readiness (an earlier
// poll's report cannot end this wait) and before it parks (the event cannot
// be missed: it is edge-triggered and reported to the next poll).
func leadRead(fd uintptr) bool {
	if !lead.rang {
		lead.rang = true
		lead.err = lead.w.ring(fd)
		return lead.err != nil
	}
	lead.w.drain(fd)
	lead.woken = true
	return true
}

// waitPoll makes the process's waker readable and parks until the runtime's
// network poller reports it. It reports whether it waited for a poll; false:
// no waker, or the ring failed (the caller falls back to runtime.Gosched).
func waitPoll() bool {
	wakerOnce.Do(func() { theWaker = newWaker() })
	if theWaker == nil {
		return false
	}
	lead.w, lead.rang, lead.err, lead.woken = theWaker, false, nil, false
	err := theWaker.rc.Read(leadRead)
	if err != nil {
		// The poller cannot wait on it (not pollable here): stop
		// trying. Only leaders touch theWaker, one at a time.
		theWaker = nil
	}
	return err == nil && lead.err == nil && lead.woken
}

// newPipeWaker opens a pipe whose read end the runtime's network poller
// watches (os.Pipe sets both ends non-blocking). A ring writes one byte, the
// wake-up reads it back: the pipe is empty between two waits. Nil if the pipe
// cannot be made (one the poller cannot wait on is dropped by waitPoll at its
// first use).
func newPipeWaker() *waker {
	r, w, err := os.Pipe()
	if err != nil {
		return nil
	}
	rc, err := r.SyscallConn()
	if err != nil {
		r.Close()
		w.Close()
		return nil
	}
	one := []byte{0}
	return &waker{
		rc: rc,
		ring: func(uintptr) error {
			_, err := w.Write(one)
			return err
		},
		drain: func(fd uintptr) {
			var b [1]byte
			syscall.Read(int(fd), b[:])
		},
		keep: []*os.File{r, w},
	}
}
