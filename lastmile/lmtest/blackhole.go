package lmtest

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"
)

// Blackhole is a 127.0.0.1 port that swallows everything: its UDP socket
// reads datagrams and never replies (QUIC blackholed), and its TCP side
// either drops SYNs (a listener whose accept queue is full: connect times
// out) or, with accept set, completes connects and never sends a byte.
type Blackhole struct {
	addr  string
	fd    int
	pc    net.PacketConn
	conns []net.Conn
	ln    net.Listener
	wg    sync.WaitGroup
}

// NewBlackhole opens a blackhole port. With accept false, SYNs are dropped
// by the kernel; with accept true, connections are accepted and left silent.
func NewBlackhole(accept bool) (*Blackhole, error) {
	b := &Blackhole{fd: -1}
	var err error
	if accept {
		var pc net.PacketConn
		pc, b.ln, err = ListenPair()
		if err != nil {
			return nil, err
		}
		b.pc, b.addr = pc, b.ln.Addr().String()
		b.wg.Add(1)
		go b.acceptLoop()
	} else if err = b.fullBacklog(); err != nil {
		return nil, err
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		buf := make([]byte, 2048)
		for {
			if _, _, err := b.pc.ReadFrom(buf); err != nil {
				return
			}
		}
	}()
	return b, nil
}

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
		b.fd, b.pc, b.addr = fd, pc, addr
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

func (b *Blackhole) acceptLoop() {
	defer b.wg.Done()
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		held = append(held, c)
	}
}

// Addr is the blackhole's "127.0.0.1:port" (TCP and UDP).
func (b *Blackhole) Addr() string { return b.addr }

// Close releases the sockets and waits for the readers.
func (b *Blackhole) Close() error {
	var errs []error
	if b.ln != nil {
		errs = append(errs, b.ln.Close())
	}
	if b.fd >= 0 {
		errs = append(errs, syscall.Close(b.fd))
	}
	for _, c := range b.conns {
		c.Close()
	}
	errs = append(errs, b.pc.Close())
	b.wg.Wait()
	return errors.Join(errs...)
}
