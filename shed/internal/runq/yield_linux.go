package runq

import (
	"encoding/binary"
	"os"
	"syscall"
)

// newWaker opens a non-blocking eventfd that the runtime's network poller
// watches. Each ring adds one to its counter: one system call, and an event
// for the (edge-triggered) poller whether or not the counter was zero, so the
// counter is never read back (it would take 2^64 rings to fill). Nil if the
// descriptor cannot be made (one the poller cannot wait on is dropped by
// waitPoll at its first use).
func newWaker() *waker {
	fd, _, errno := syscall.Syscall(syscall.SYS_EVENTFD2, 0, syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if errno != 0 {
		return nil
	}
	f := os.NewFile(fd, "shed-poll-yield")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil
	}
	return &waker{rc: rc, ring: ringEventfd, drain: func(uintptr) {}, keep: []*os.File{f}}
}

var eventfdOne = binary.NativeEndian.AppendUint64(nil, 1)

func ringEventfd(fd uintptr) error {
	_, err := syscall.Write(int(fd), eventfdOne)
	return err
}
