//go:build unix

package lmtest

import (
	"fmt"
	"net"
	"syscall"
	"time"
)

// fullBacklog listens with a backlog of 0, never accepts, and fills the
// accept queue: the kernel drops further SYNs. The UDP socket shares the
// port.
func (b *Blackhole) fullBacklog() error {
	var last error
	for range 50 {
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
		if err != nil {
			return err
		}
		if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			syscall.Close(fd)
			return err
		}
		if err := syscall.Listen(fd, 0); err != nil {
			syscall.Close(fd)
			return err
		}
		sa, err := syscall.Getsockname(fd)
		if err != nil {
			syscall.Close(fd)
			return err
		}
		addr := fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			last = err
			syscall.Close(fd)
			continue
		}
		b.raw, b.pc, b.addr = func() error { return syscall.Close(fd) }, pc, addr
		// Backlog 0 admits one connection (two attempts: the kernel may
		// admit one more than the backlog).
		for range 2 {
			if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
				b.conns = append(b.conns, c)
			}
		}
		return nil
	}
	return last
}
