package lastmile

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/veerhq/veer/outcome"
)

// nodeRT carries requests to one node over one protocol family, reusing its
// connections. It adopts the connection that won the race (the first dial
// returns it) and dials the same address itself after that, whatever host
// the request names: the node, not DNS, decides where bytes go.
type nodeRT struct {
	proto Protocol
	addr  string
	sni   string
	h3    *http3.Transport
	tcp   *http.Transport

	mu   sync.Mutex
	next *conn // the race winner, handed to the first dial

	learn func(values []string) // records an Alt-Svc header (TCP nodes)
}

var _ http.RoundTripper = (*nodeRT)(nil)

func newNodeRT(r *racer, c *conn, addr, sni string, useTLS bool) *nodeRT {
	n := &nodeRT{proto: c.step, addr: addr, sni: sni, next: c}
	if c.step == ProtocolH3 {
		n.h3 = &http3.Transport{
			TLSClientConfig: r.tlsConfig(sni),
			QUICConfig:      r.quicConfig(),
			Dial: func(ctx context.Context, _ string, tlsCfg *tls.Config, qcfg *quic.Config) (*quic.Conn, error) {
				if c := n.take(); c != nil {
					return c.quic, nil
				}
				qc, err := quic.DialAddr(ctx, addr, tlsCfg, qcfg)
				if err != nil && ctx.Err() == nil {
					return nil, outcome.Wrap(outcome.QUICHandshake, err)
				}
				return qc, err
			},
		}
		return n
	}
	n.learn = func(v []string) { r.alt.learn(addr, v, r.clk.Now()) }
	n.tcp = &http.Transport{
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
	}
	if useTLS {
		n.tcp.DialTLSContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			if c := n.take(); c != nil {
				return c.tcp, nil
			}
			c, err := r.dialTCP(ctx, addr, sni, true)
			if err != nil {
				return nil, err
			}
			return c.tcp, nil
		}
	} else {
		n.tcp.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			if c := n.take(); c != nil {
				return c.tcp, nil
			}
			return r.dial(ctx, "tcp", addr)
		}
	}
	return n
}

func (n *nodeRT) take() *conn {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := n.next
	n.next = nil
	return c
}

// adopt hands a freshly raced connection to the next dial.
func (n *nodeRT) adopt(c *conn) {
	n.mu.Lock()
	old := n.next
	n.next = c
	n.mu.Unlock()
	if old != nil {
		old.close()
	}
}

func (n *nodeRT) RoundTrip(req *http.Request) (*http.Response, error) {
	if n.h3 != nil {
		resp, err := n.h3.RoundTrip(req)
		if err != nil && outcome.ClassifyError(err) == outcome.NetworkOther {
			// quic-go's errors after the handshake (idle timeout, stream
			// reset) carry no kind of their own.
			err = outcome.Wrap(quicKind(err), err)
		}
		return resp, err
	}
	resp, err := n.tcp.RoundTrip(req)
	if err == nil && n.learn != nil {
		if v := resp.Header["Alt-Svc"]; len(v) > 0 {
			n.learn(v)
		}
	}
	return resp, err
}

func (n *nodeRT) close() {
	if c := n.take(); c != nil {
		c.close()
	}
	if n.h3 != nil {
		_ = n.h3.Close()
	}
	if n.tcp != nil {
		n.tcp.CloseIdleConnections()
	}
}

func quicKind(err error) outcome.Kind {
	var idle *quic.IdleTimeoutError
	var hs *quic.HandshakeTimeoutError
	switch {
	case errorsAs(err, &hs):
		return outcome.QUICHandshake
	case errorsAs(err, &idle):
		return outcome.ResponseTimeout
	}
	return outcome.ConnectionReset
}
