//go:build unix

package h1

import (
	"errors"
	"io"
	"net"
	"syscall"
	"time"
)

const parkSupported = true

// waitReadable blocks, holding no buffer, until c has bytes to read, or
// until the client closes (io.EOF), deadline passes (zero: none) or c is
// closed. It peeks at the socket (MSG_PEEK): nothing is consumed.
func waitReadable(c net.Conn, deadline time.Time) error {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return errors.ErrUnsupported
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	if err := c.SetReadDeadline(deadline); err != nil {
		return err
	}
	var b [1]byte
	var perr error
	err = rc.Read(func(fd uintptr) bool {
		for {
			n, _, e := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK)
			switch e {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // wait for the socket to become readable
			case nil:
				if n == 0 {
					perr = io.EOF // the client closed: nothing to hand back
				}
			default:
				perr = e
			}
			return true
		}
	})
	if err == nil {
		err = perr
	}
	if err == nil {
		err = c.SetReadDeadline(time.Time{})
	}
	return err
}
