package lmtest

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go/http3"
)

// Node is an access node: HTTPS on TCP (HTTP/2 and HTTP/1.1) and HTTP/3 on
// UDP, on the same 127.0.0.1 port, with a certificate from a test CA. Its
// default handler answers 200 with "<name> <proto>".
type Node struct {
	Name string

	addr    string
	tcpLn   *gatedListener
	udp     net.PacketConn
	h2      *http.Server
	h3      *http3.Server
	quicOff atomic.Bool
	tcpOff  atomic.Bool
	hits    atomic.Int64
	wg      sync.WaitGroup
}

// NodeOptions configure a Node.
type NodeOptions struct {
	// Names are the certificate's DNS names (127.0.0.1 is always included).
	Names []string
	// NoH2 makes the TCP side offer HTTP/1.1 only.
	NoH2 bool
	// Handler replaces the default handler.
	Handler http.Handler
	// NoQUIC leaves the UDP port closed (an origin without HTTP/3: a QUIC
	// attempt gets an ICMP port-unreachable).
	NoQUIC bool
	// AdvertiseH3 adds `Alt-Svc: h3=":port"; ma=86400` to responses over
	// TCP, as an HTTP/3-capable origin does.
	AdvertiseH3 bool
}

// NewNode starts a node named name.
func NewNode(name string, ca *CA, o NodeOptions) (*Node, error) {
	cert, err := ca.Issue(o.Names...)
	if err != nil {
		return nil, err
	}
	pc, ln, err := ListenPair()
	if err != nil {
		return nil, err
	}
	n := &Node{Name: name, addr: ln.Addr().String(), udp: pc}
	h := o.Handler
	if h == nil {
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "%s %s", name, r.Proto)
		})
	}
	_, port, _ := net.SplitHostPort(n.addr)
	counted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.hits.Add(1)
		if o.AdvertiseH3 && r.ProtoMajor < 3 {
			w.Header().Set("Alt-Svc", `h3=":`+port+`"; ma=86400`)
		}
		h.ServeHTTP(w, r)
	})
	protos := []string{"h2", "http/1.1"}
	if o.NoH2 {
		protos = []string{"http/1.1"}
	}
	tcpTLS := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: protos}
	n.tcpLn = &gatedListener{Listener: tls.NewListener(ln, tcpTLS), off: &n.tcpOff}
	n.h2 = &http.Server{Handler: counted}
	if o.NoH2 {
		n.h2.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
	}
	n.h3 = &http3.Server{
		Handler:   counted,
		TLSConfig: http3.ConfigureTLSConfig(&tls.Config{Certificates: []tls.Certificate{cert}}),
	}
	n.wg.Add(1)
	go func() { defer n.wg.Done(); _ = n.h2.Serve(n.tcpLn) }()
	if o.NoQUIC {
		pc.Close()
		return n, nil
	}
	n.wg.Add(1)
	go func() { defer n.wg.Done(); _ = n.h3.Serve(&gatedPacketConn{PacketConn: pc, off: &n.quicOff}) }()
	return n, nil
}

// Addr is the node's "127.0.0.1:port" (TCP and UDP).
func (n *Node) Addr() string { return n.addr }

// BlockQUIC makes the UDP side drop every packet (QUIC blocked) when on.
func (n *Node) BlockQUIC(on bool) { n.quicOff.Store(on) }

// BlockTCP makes the TCP side reset every connection when on, right after
// the client's first bytes arrive (so always after its connect completed),
// and closes the connections already open (the edge died).
func (n *Node) BlockTCP(on bool) {
	n.tcpOff.Store(on)
	if on {
		n.tcpLn.closeAll()
	}
}

// Hits is the number of requests served.
func (n *Node) Hits() int64 { return n.hits.Load() }

// Close stops both servers and waits for them.
func (n *Node) Close() error {
	err := errors.Join(n.h3.Close(), n.h2.Close())
	n.udp.Close()
	n.wg.Wait()
	return err
}

// gatedPacketConn drops every received packet while off is set.
type gatedPacketConn struct {
	net.PacketConn
	off *atomic.Bool
}

func (c *gatedPacketConn) ReadFrom(p []byte) (int, net.Addr, error) {
	for {
		n, a, err := c.PacketConn.ReadFrom(p)
		if err != nil || !c.off.Load() {
			return n, a, err
		}
	}
}

// gatedListener closes accepted connections while off is set (a reset).
type gatedListener struct {
	net.Listener
	off *atomic.Bool

	mu    sync.Mutex
	conns []net.Conn // served connections, closed by closeAll
}

func (l *gatedListener) closeAll() {
	l.mu.Lock()
	conns := l.conns
	l.conns = nil
	l.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

func (l *gatedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return c, err
		}
		if !l.off.Load() {
			l.mu.Lock()
			l.conns = append(l.conns, c)
			l.mu.Unlock()
			return c, nil
		}
		if tc, ok := c.(*tls.Conn); ok {
			if raw, ok := tc.NetConn().(*net.TCPConn); ok {
				// Wait for the client's first bytes (its TLS hello) before
				// the reset, so that the reset always arrives after the
				// client's connect completed: a reset seen inside connect
				// would be a refusal (nothing sent), and which of the two a
				// test observes must not depend on scheduling.
				_ = raw.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
				_, _ = raw.Read(make([]byte, 1))
				_ = raw.SetLinger(0)
			}
		}
		c.Close()
	}
}

// SetReadBuffer and SetWriteBuffer let quic-go size the socket buffers of
// the wrapped *net.UDPConn (it logs a warning otherwise).
func (c *gatedPacketConn) SetReadBuffer(n int) error {
	if u, ok := c.PacketConn.(*net.UDPConn); ok {
		return u.SetReadBuffer(n)
	}
	return nil
}

func (c *gatedPacketConn) SetWriteBuffer(n int) error {
	if u, ok := c.PacketConn.(*net.UDPConn); ok {
		return u.SetWriteBuffer(n)
	}
	return nil
}
