package gateway

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// framedListener hands out framedConns: the plain listener (HTTP/1.1 and
// prior-knowledge h2c, whose preface the framer lets through).
type framedListener struct {
	net.Listener
	maxHeaderBytes int
	onRefuse       func(net.Conn, string)
}

func (l *framedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return newFramedConn(c, l.maxHeaderBytes, l.onRefuse), nil
}

// tlsListener terminates TLS before net/http sees a connection, so that
// HTTP/1.1 connections can be framed while HTTP/2 ones stay *tls.Conn
// (net/http serves HTTP/2, and sets Request.TLS, only on a *tls.Conn).
// Each handshake runs on a goroutine of its own, bounded by timeout, never
// on the accepting one; Accept returns connections whose handshake is
// done: a *tls.Conn that negotiated h2, a framedTLSConn otherwise.
type tlsListener struct {
	inner          net.Listener
	conf           *tls.Config
	timeout        time.Duration
	maxHeaderBytes int
	onRefuse       func(net.Conn, string)
	log            *slog.Logger

	ready chan net.Conn
	errc  chan error
	done  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
	mu    sync.Mutex
	shake map[net.Conn]struct{} // in handshake; closed by Close
}

func newTLSListener(inner net.Listener, conf *tls.Config, timeout time.Duration, maxHeaderBytes int, onRefuse func(net.Conn, string), log *slog.Logger) *tlsListener {
	l := &tlsListener{inner: inner, conf: conf, timeout: timeout, maxHeaderBytes: maxHeaderBytes, onRefuse: onRefuse, log: log,
		ready: make(chan net.Conn), errc: make(chan error), done: make(chan struct{}), shake: map[net.Conn]struct{}{}}
	l.wg.Add(1)
	go l.acceptLoop()
	return l
}

func (l *tlsListener) acceptLoop() {
	defer l.wg.Done()
	for {
		c, err := l.inner.Accept()
		if err != nil {
			select {
			case l.errc <- err: // net/http retries temporary errors
			case <-l.done:
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		l.mu.Lock()
		select {
		case <-l.done:
			l.mu.Unlock()
			_ = c.Close()
			return
		default:
		}
		l.shake[c] = struct{}{}
		l.wg.Add(1)
		l.mu.Unlock()
		go l.handshake(c)
	}
}

func (l *tlsListener) handshake(raw net.Conn) {
	defer l.wg.Done()
	tc := tls.Server(raw, l.conf)
	if l.timeout > 0 {
		_ = raw.SetDeadline(time.Now().Add(l.timeout))
	}
	err := tc.HandshakeContext(context.Background())
	l.mu.Lock()
	delete(l.shake, raw)
	l.mu.Unlock()
	if err != nil {
		var re tls.RecordHeaderError
		if errors.As(err, &re) && re.Conn != nil && looksLikeHTTP(re.RecordHeader[:]) {
			_, _ = io.WriteString(re.Conn, "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
		}
		l.log.Debug("TLS handshake failed", "remote", raw.RemoteAddr().String(), "err", err)
		_ = raw.Close()
		return
	}
	_ = raw.SetDeadline(time.Time{})
	var c net.Conn = tc
	if tc.ConnectionState().NegotiatedProtocol != "h2" {
		c = framedTLSConn{newFramedConn(tc, l.maxHeaderBytes, l.onRefuse), tc}
	}
	select {
	case l.ready <- c:
	case <-l.done:
		_ = c.Close()
	}
}

func looksLikeHTTP(hdr []byte) bool {
	for _, m := range []string{"GET /", "HEAD ", "POST ", "PUT /", "OPTIO"} {
		if bytes.HasPrefix(hdr, []byte(m)) {
			return true
		}
	}
	return false
}

func (l *tlsListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case err := <-l.errc:
		return nil, err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops accepting, aborts the handshakes in progress and waits for
// the listener's goroutines.
func (l *tlsListener) Close() error {
	var err error
	l.once.Do(func() {
		l.mu.Lock()
		close(l.done)
		for c := range l.shake {
			_ = c.Close()
		}
		l.mu.Unlock()
		err = l.inner.Close()
		l.wg.Wait()
	})
	return err
}

func (l *tlsListener) Addr() net.Addr { return l.inner.Addr() }

// handshakeTimeout is net/http's bound for a TLS handshake: the smallest
// positive of the read-header, read and write timeouts.
func handshakeTimeout(ds ...time.Duration) time.Duration {
	var t time.Duration
	for _, d := range ds {
		if d > 0 && (t == 0 || d < t) {
			t = d
		}
	}
	return t
}
