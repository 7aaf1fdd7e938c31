//go:build !linux

package dnsserver

import (
	"errors"
	"net"
	"net/netip"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

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
