// Package netem is a userspace network path for benchmarks on
// loopback, where tc netem is not available: a relay on one 127.0.0.1 port,
// UDP and TCP, that delays every datagram and every TCP chunk by a one-way
// delay in each direction and loses UDP datagrams with a probability. A
// lost TCP segment is modelled as a retransmission delay (the chunk and
// everything after it in that direction arrive RTO later: 200 ms + one
// RTT), and the TCP handshake, which the kernel completes before the relay
// sees the connection, is charged by Dial: one RTT, plus the SYN
// retransmission timeout (1 s, doubling) for each lost SYN or SYN-ACK.
//
// Contract: New listens on a kernel-chosen port; Close stops the relay and
// waits for its goroutines. Delays are scheduled on the wall clock with
// time.AfterFunc and per-direction queues (TCP order is kept).
//
// Failure mode: a relay that cannot reach its target drops the datagram or
// closes the client connection, as a network would.
package netem

import (
	"cmp"
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/veerhq/veer/internal/listenpair"
)

// Config is one emulated path.
type Config struct {
	// OneWay is the delay in each direction (RTT = 2 × OneWay).
	OneWay time.Duration
	// Loss is the probability that a packet is lost, per direction.
	Loss float64
	// Seed seeds the loss draws.
	Seed uint64
	// FlowIdle closes a UDP flow (one client address) after this long
	// without a datagram either way; default DefaultFlowIdle.
	FlowIdle time.Duration
}

// tcpRTOMin is Linux's minimum retransmission timeout.
const tcpRTOMin = 200 * time.Millisecond

// synRTO is Linux's initial SYN retransmission timeout.
const synRTO = time.Second

// Proxy relays 127.0.0.1:<port> to a target, UDP and TCP.
type Proxy struct {
	cfg    Config
	target string
	pc     net.PacketConn
	ln     net.Listener
	addr   string

	mu     sync.Mutex
	rng    *rand.Rand
	flows  map[string]*flow
	conns  map[net.Conn]struct{} // open relayed connections, both sides
	idle   time.Duration
	forgot chan struct{} // one token per forgotten pair (tests; never blocks)
	idled  chan struct{} // one token per idle UDP flow closed (tests; never blocks)
	closed bool
	wg     sync.WaitGroup
}

// New starts a proxy to target ("127.0.0.1:port", UDP and TCP).
func New(target string, cfg Config) (*Proxy, error) {
	ln, pc, err := listenpair.Listen("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{cfg: cfg, target: target, idle: cmp.Or(cfg.FlowIdle, DefaultFlowIdle), pc: pc, ln: ln, addr: ln.Addr().String(),
		rng: rand.New(rand.NewPCG(cfg.Seed, 1)), flows: map[string]*flow{}, conns: map[net.Conn]struct{}{}, forgot: make(chan struct{}, 64), idled: make(chan struct{}, 64)}
	p.wg.Add(2)
	go p.udpLoop()
	go p.tcpLoop()
	return p, nil
}

// Addr is the proxy's "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.addr }

// Close stops the relay.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	flows, conns := p.flows, p.conns
	p.flows, p.conns = map[string]*flow{}, map[net.Conn]struct{}{}
	p.mu.Unlock()
	err := errors.Join(p.pc.Close(), p.ln.Close())
	for _, f := range flows {
		f.up.Close()
	}
	for c := range conns {
		c.Close()
	}
	p.wg.Wait()
	return err
}

func (p *Proxy) lost() bool {
	if p.cfg.Loss <= 0 {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rng.Float64() < p.cfg.Loss
}

// Dial connects to the proxy over TCP after charging the handshake: one
// RTT, plus synRTO (doubling) per lost SYN or SYN-ACK. Use it as the
// client's DialContext for addresses served by proxies.
func (p *Proxy) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	wait := 2 * p.cfg.OneWay
	for rto := synRTO; wait < time.Minute; rto *= 2 {
		synLost := p.lost()
		synAckLost := p.lost()
		if !synLost && !synAckLost {
			break
		}
		wait += rto
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return nil, &net.OpError{Op: "dial", Net: network, Err: ctx.Err()}
	}
	return (&net.Dialer{}).DialContext(ctx, network, addr)
}

func (p *Proxy) udpLoop() {
	defer p.wg.Done()
	buf := make([]byte, udpBuf)
	for {
		n, from, err := p.pc.ReadFrom(buf)
		if err != nil {
			return
		}
		f := p.flow(from)
		if f == nil || p.lost() {
			continue
		}
		f.last.Store(time.Now().UnixNano())
		up := f.up
		data := append([]byte(nil), buf[:n]...)
		time.AfterFunc(p.cfg.OneWay, func() { _, _ = up.Write(data) })
	}
}

// flow is one client address's upstream socket.
type flow struct {
	up   *net.UDPConn
	last atomic.Int64 // unix ns of the last datagram either way
}

// DefaultFlowIdle: a UDP flow without a datagram either way for this long
// is closed (a DNS client uses a new source port per query: without it
// every query would leave a socket and a goroutine behind).
const DefaultFlowIdle = 30 * time.Second

// flow returns the upstream socket of a client address, starting its
// reply relay.
func (p *Proxy) flow(from net.Addr) *flow {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	key := from.String()
	if f := p.flows[key]; f != nil {
		return f
	}
	ra, err := net.ResolveUDPAddr("udp", p.target)
	if err != nil {
		return nil
	}
	up, err := net.DialUDP("udp", nil, ra)
	if err != nil {
		return nil
	}
	f := &flow{up: up}
	f.last.Store(time.Now().UnixNano())
	p.flows[key] = f
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		buf := make([]byte, udpBuf)
		for {
			_ = up.SetReadDeadline(time.Unix(0, f.last.Load()).Add(p.idle))
			n, err := up.Read(buf)
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				if time.Since(time.Unix(0, f.last.Load())) < p.idle {
					continue // the client sent meanwhile
				}
				p.mu.Lock()
				if p.flows[key] == f {
					delete(p.flows, key)
				}
				p.mu.Unlock()
				up.Close()
				p.flowClosed()
				return
			}
			if err != nil {
				continue // an ICMP error from the target: keep relaying
			}
			f.last.Store(time.Now().UnixNano())
			if p.lost() {
				continue
			}
			data := append([]byte(nil), buf[:n]...)
			time.AfterFunc(p.cfg.OneWay, func() { _, _ = p.pc.WriteTo(data, from) })
		}
	}()
	return f
}

// flowClosed is a test hook's signal; it never blocks.
func (p *Proxy) flowClosed() {
	select {
	case p.idled <- struct{}{}:
	default:
	}
}

func (p *Proxy) tcpLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			u.Close()
			return
		}
		p.conns[c], p.conns[u] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(1)
		go func() {
			// both directions, then forget the pair: a long-lived proxy
			// (a device of veer up) sees many connections come and go
			defer p.wg.Done()
			var both sync.WaitGroup
			both.Add(2)
			go func() { defer both.Done(); p.pipe(c, u) }()
			go func() { defer both.Done(); p.pipe(u, c) }()
			both.Wait()
			c.Close()
			u.Close()
			p.mu.Lock()
			delete(p.conns, c)
			delete(p.conns, u)
			p.mu.Unlock()
			select {
			case p.forgot <- struct{}{}:
			default:
			}
		}()
	}
}

type chunk struct {
	at   time.Time
	data []byte
}

// pipe relays src to dst, each chunk OneWay later (RTO later when lost),
// in order.
func (p *Proxy) pipe(src, dst net.Conn) {
	q := make(chan chunk, 256)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range q {
			if d := time.Until(c.at); d > 0 {
				time.Sleep(d)
			}
			if _, err := dst.Write(c.data); err != nil {
				for range q {
				}
				return
			}
		}
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}()
	buf := make([]byte, tcpBuf)
	var last time.Time
	for {
		n, err := src.Read(buf)
		if n > 0 {
			at := time.Now().Add(p.cfg.OneWay)
			if p.lost() {
				at = at.Add(tcpRTOMin + 2*p.cfg.OneWay)
			}
			if at.Before(last) {
				at = last // in order: a late chunk holds the ones behind it
			}
			last = at
			q <- chunk{at, append([]byte(nil), buf[:n]...)}
		}
		if err != nil {
			break
		}
	}
	close(q)
	<-done
}

// open is how many relayed connections (both sides counted) are held.
func (p *Proxy) open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Buffer sizes: a datagram larger than udpBuf is truncated (DNS over UDP
// is at most 1232 bytes with EDNS0, QUIC packets 1500); a TCP read takes at
// most tcpBuf. veer up runs two relays per device, so they stay small.
const (
	udpBuf = 16 << 10
	tcpBuf = 16 << 10
)
