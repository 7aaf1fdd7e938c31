package dnsserver

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"time"
)

// maxMsg is the largest DNS message (RFC 1035 over TCP: a 16-bit length).
const maxMsg = 65535

// udpBatch is how many datagrams one system call reads or writes
// (recvmmsg and sendmmsg on Linux, see udp_linux.go; elsewhere what
// golang.org/x/net does, one at a time on most systems).
const udpBatch = 32

// serveStream accepts TCP (or DoT) connections, at most MaxTCPConns at
// once; one over the limit is closed at once and counted.
func (s *Server) serveStream(ln net.Listener, tr Transport) {
	defer s.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			if s.closed.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			s.log.Warn("dnsserver: accept", "transport", tr.String(), "err", err)
			time.Sleep(10 * time.Millisecond) // EMFILE and the like: do not spin
			continue
		}
		select {
		case s.sem <- struct{}{}:
		default:
			s.m.dropped.WithLabelValues(dropTCPLimit).Inc()
			c.Close()
			continue
		}
		if !s.track(c, true) {
			c.Close()
			<-s.sem
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { <-s.sem }()
			defer s.track(c, false)
			defer c.Close()
			s.serveConn(c, tr)
		}()
	}
}

// track adds or removes an open connection; it reports false once the
// server is closed.
func (s *Server) track(c net.Conn, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !add {
		delete(s.conns, c)
		return true
	}
	if s.closed.Load() {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

// serveConn answers length-prefixed queries on one connection in order
// (RFC 7766 and, over TLS, RFC 7858) until the client closes it, it stays
// idle for TCPIdle, or it sends something malformed.
func (s *Server) serveConn(c net.Conn, tr Transport) {
	var src netip.Addr
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		src = ta.AddrPort().Addr().Unmap()
	}
	in := make([]byte, maxMsg)
	out := make([]byte, 2+maxMsg)
	for {
		idle := s.state.Load().cfg.TCPIdle
		c.SetReadDeadline(time.Now().Add(idle))
		if _, err := io.ReadFull(c, in[:2]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint16(in[:2]))
		if _, err := io.ReadFull(c, in[:n]); err != nil {
			return
		}
		resp, ok := s.Answer(in[:n], src, tr, out[2:])
		if !ok {
			return
		}
		msg := out[:2+len(resp)]
		if &resp[0] != &out[2] {
			msg = append(out[:2], resp...)
		}
		binary.BigEndian.PutUint16(msg, uint16(len(resp)))
		c.SetWriteDeadline(time.Now().Add(idle))
		if _, err := c.Write(msg); err != nil {
			return
		}
	}
}
