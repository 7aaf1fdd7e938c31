package lmtest

import (
	"errors"
	"net"
	"sync"
)

// Blackhole is a 127.0.0.1 port that swallows everything: its UDP socket
// reads datagrams and never replies (QUIC blackholed), and its TCP side
// either drops SYNs (a listener whose accept queue is full: connect times
// out) or, with accept set, completes connects and never sends a byte.
type Blackhole struct {
	addr  string
	raw   func() error // closes the full-backlog listener (nil with accept)
	pc    net.PacketConn
	conns []net.Conn
	ln    net.Listener
	wg    sync.WaitGroup
}

// NewBlackhole opens a blackhole port. With accept false, SYNs are dropped
// by the kernel; with accept true, connections are accepted and left silent.
func NewBlackhole(accept bool) (*Blackhole, error) {
	b := &Blackhole{}
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
	if b.raw != nil {
		errs = append(errs, b.raw())
	}
	for _, c := range b.conns {
		c.Close()
	}
	errs = append(errs, b.pc.Close())
	b.wg.Wait()
	return errors.Join(errs...)
}
