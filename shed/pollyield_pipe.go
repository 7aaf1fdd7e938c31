//go:build unix && !linux

package shed

import (
	"os"
	"syscall"
)

// newWaker opens a pipe whose read end the runtime's network poller watches
// (os.Pipe sets both ends non-blocking). A ring writes one byte, the wake-up
// reads it back: the pipe is empty between two waits. Nil if the pipe cannot
// be made or polled.
func newWaker() *waker {
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
