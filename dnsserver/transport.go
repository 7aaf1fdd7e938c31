package dnsserver

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// maxMsg is the largest DNS message (RFC 1035 over TCP: a 16-bit length).
const maxMsg = 65535

// udpBatch is how many datagrams one system call reads or writes
// (recvmmsg and sendmmsg on Linux; one at a time elsewhere).
const udpBatch = 32

// batchConn is ipv4.PacketConn or ipv6.PacketConn.
type batchConn interface {
	ReadBatch(ms []ipv4.Message, flags int) (int, error)
	WriteBatch(ms []ipv4.Message, flags int) (int, error)
}

// serveUDP reads queries from the shared UDP socket in batches and answers
// each inline: no goroutine and no buffer is created per query, and under
// load one system call carries many datagrams each way.
func (s *Server) serveUDP() {
	defer s.wg.Done()
	var bc batchConn = ipv4.NewPacketConn(s.udp)
	if la := s.udp.LocalAddr().(*net.UDPAddr); la.IP.To4() == nil {
		bc = ipv6.NewPacketConn(s.udp)
	}
	in := make([]ipv4.Message, udpBatch)
	out := make([]ipv4.Message, udpBatch)
	outBufs := make([][]byte, udpBatch)
	for i := range in {
		in[i].Buffers = [][]byte{make([]byte, maxMsg)}
		outBufs[i] = make([]byte, maxMsg)
		out[i].Buffers = make([][]byte, 1)
	}
	for {
		n, err := bc.ReadBatch(in, 0)
		if err != nil {
			if s.closed.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			s.log.Warn("dnsserver: udp read", "err", err)
			continue
		}
		k := 0
		for i := range n {
			m := &in[i]
			from, ok := m.Addr.(*net.UDPAddr)
			if !ok {
				continue
			}
			src, _ := netip.AddrFromSlice(from.IP)
			resp, ok := s.Answer(m.Buffers[0][:m.N], src.Unmap(), UDP, outBufs[k])
			if !ok {
				continue
			}
			out[k].Buffers[0] = resp
			out[k].Addr = m.Addr
			k++
		}
		for sent := 0; sent < k; {
			w, err := bc.WriteBatch(out[sent:k], 0)
			if err != nil {
				if !s.closed.Load() {
					s.log.Debug("dnsserver: udp write", "err", err)
				}
				sent++ // skip the datagram that failed
				continue
			}
			sent += w
		}
	}
}

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
