package lastmile

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/outcome"
)

// racer establishes a connection to one node by racing HTTP/3 against TCP,
// happy-eyeballs style, and remembers protocols that failed.
type racer struct {
	cfg    RaceConfig
	clk    clock.Clock
	roots  *x509.CertPool
	dial   func(ctx context.Context, network, addr string) (net.Conn, error)
	broken *brokenMemory
	alt    *altSvcMemory
	m      *metrics

	base context.Context // canceled by close: ends background attempts
	stop context.CancelFunc
	wg   sync.WaitGroup
}

func newRacer(cfg RaceConfig, opts Options, m *metrics) *racer {
	r := &racer{cfg: cfg, clk: clock.Or(opts.Clock), roots: opts.RootCAs, dial: opts.DialContext, m: m,
		broken: newBrokenMemory(cfg.BrokenBase, cfg.BrokenMax), alt: newAltSvcMemory()}
	if r.dial == nil {
		r.dial = (&net.Dialer{}).DialContext
	}
	r.base, r.stop = context.WithCancel(context.Background())
	return r
}

// close cancels attempts still running in the background and waits for them.
func (r *racer) close() {
	r.stop()
	r.wg.Wait()
}

// conn is an established connection: a QUIC connection or a TLS (or, for
// plain http, TCP) connection.
type conn struct {
	step  Protocol // ProtocolH3 or ProtocolTCP
	proto string   // h3, h2, http/1.1
	quic  *quic.Conn
	tcp   net.Conn
}

func (c *conn) close() {
	if c.quic != nil {
		_ = c.quic.CloseWithError(0, "")
	}
	if c.tcp != nil {
		_ = c.tcp.Close()
	}
}

// raceOpts vary one race.
type raceOpts struct {
	plain    bool // plain TCP (http://): no TLS, no HTTP/3
	noH3     bool // the node does not offer HTTP/3
	h3       bool // the node offers HTTP/3 (a scheduler answer): try it
	together bool // start TCP with QUIC instead of after Race.TCPDelay
}

// running is an attempt in flight; detach unbinds it from the request's
// context.
type running struct{ detach func() bool }

type attempt struct {
	step Protocol
	c    *conn
	err  error
}

// race connects to addr with TLS server name sni (tls false: plain TCP, no
// race). The first handshake to complete wins; every failure is recorded in
// tr and, for a protocol that truly failed (not one that lost the race or
// was canceled), in the broken memory of network.
func (r *racer) race(ctx context.Context, network uint64, addr, sni string, o raceOpts, tr *Trace) (*conn, error) {
	now := r.clk.Now()
	useTLS := !o.plain
	h3 := r.tryH3(addr, o, now)
	h3Broken := h3 && r.broken.broken(network, addr, ProtocolH3, now)
	tcpBroken := r.broken.broken(network, addr, ProtocolTCP, now)
	if h3Broken && !tcpBroken {
		h3 = false // known broken: go straight to TCP
	}
	results := make(chan attempt, 2)
	var started []running
	var tcpStart time.Time
	start := func(s Protocol) {
		if s == ProtocolTCP {
			tcpStart = r.clk.Now()
		}
		actx, cancel := context.WithTimeout(r.base, r.cfg.ConnectTimeout)
		detach := context.AfterFunc(ctx, cancel)
		started = append(started, running{detach})
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer cancel()
			var c *conn
			var err error
			if s == ProtocolH3 {
				c, err = r.dialQUIC(actx, addr, sni)
			} else {
				c, err = r.dialTCP(actx, addr, sni, useTLS)
			}
			if err != nil {
				err = attemptError(ctx, actx, err)
			}
			results <- attempt{s, c, err}
		}()
	}
	var timer clock.Timer
	var tcpC <-chan time.Time
	if h3 {
		start(ProtocolH3)
		delay := r.cfg.TCPDelay
		if o.together {
			delay = 0
		}
		timer = r.clk.NewTimer(delay)
		tcpC = timer.C()
		defer timer.Stop()
	} else {
		start(ProtocolTCP)
	}
	tcpStarted := !h3
	pending := len(started)
	var firstErr error
	var graceC <-chan time.Time
	for {
		select {
		case <-graceC:
			// TCP failed outright (refused, reset) and QUIC, which had a
			// head start, still has no answer: the node is taken as down
			// rather than waiting out the QUIC handshake timeout. QUIC
			// finishes in the background and is marked broken if it fails.
			err := outcome.Wrap(outcome.QUICHandshake, ErrQUICAbandoned)
			tr.fail(Failure{Protocol: ProtocolH3, Target: addr, Kind: outcome.QUICHandshake, Err: err})
			r.m.fail(string(ProtocolH3), outcome.QUICHandshake)
			r.markBroken(network, addr, ProtocolH3)
			r.release(started, pending, results, network, addr, true)
			return nil, firstErr
		case <-tcpC:
			tcpC = nil
			if !tcpStarted {
				tcpStarted = true
				start(ProtocolTCP)
				pending++
			}
		case a := <-results:
			pending--
			if a.err == nil {
				r.broken.succeed(network, addr, a.step)
				r.m.conns.WithLabelValues(a.c.proto).Inc()
				// The loser, if any, finishes in the background: a late
				// failure still marks its protocol broken, a late success
				// is closed.
				r.release(started, pending, results, network, addr, false)
				return a.c, nil
			}
			k := outcome.ClassifyError(a.err)
			if k != outcome.ClientCanceled || ctx.Err() == nil {
				// (an attempt canceled because another node or step won
				// is not a failure)
				tr.fail(Failure{Protocol: a.step, Target: addr, Kind: k, Err: a.err})
				r.m.fail(string(a.step), k)
			}
			if ctx.Err() == nil && k != outcome.ClientCanceled {
				r.markBroken(network, addr, a.step)
			}
			if firstErr == nil {
				firstErr = a.err
			}
			if !tcpStarted {
				tcpStarted = true
				tcpC = nil
				start(ProtocolTCP)
				pending++
			}
			if pending == 0 {
				return nil, a.err
			}
			if a.step == ProtocolTCP && graceC == nil && (k == outcome.ConnectRefused || k == outcome.ConnectionReset) {
				// One more round trip (as long as TCP took to fail): QUIC
				// had its head start and that round trip already.
				grace := r.clk.NewTimer(max(r.clk.Since(tcpStart), minQUICGrace))
				defer grace.Stop()
				graceC = grace.C()
			}
		}
	}
}

// attemptError classifies a failed attempt whose context may have ended: a
// deadline (the attempt's own, or the step's in ctx) is a connect timeout,
// a network failure of the node; only a cancellation of ctx that is not a
// deadline stays ClientCanceled.
func attemptError(ctx, actx context.Context, err error) error {
	k := outcome.ClassifyError(err)
	if k == outcome.QUICHandshake || k == outcome.ConnectTimeout {
		return err
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || ctx.Err() == nil && errors.Is(actx.Err(), context.DeadlineExceeded) {
		return outcome.Wrap(outcome.ConnectTimeout, err)
	}
	return err
}

// ErrUDPRefused: the node's UDP port answered a QUIC attempt with an ICMP
// port-unreachable; QUIC failed at once (outcome.ConnectRefused).
var ErrUDPRefused = errors.New("lastmile: QUIC: UDP port unreachable")

// minQUICGrace is the least time QUIC still gets after TCP failed outright
// (otherwise: as long as TCP took to fail, about one round trip).
const minQUICGrace = 100 * time.Millisecond

// ErrQUICAbandoned is recorded in a Trace when TCP to a node failed outright
// and the race stopped waiting for a QUIC handshake that had not answered.
var ErrQUICAbandoned = errors.New("lastmile: QUIC handshake abandoned: TCP failed and QUIC did not answer")

// release detaches the attempts still running from the request and lets
// them finish in the background: a late failure marks its protocol broken
// (unless marked already), a late success is closed (and clears a mark made
// when it was abandoned).
func (r *racer) release(started []running, pending int, results <-chan attempt, network uint64, addr string, marked bool) {
	for _, s := range started {
		s.detach()
	}
	if pending == 0 {
		return
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for range pending {
			l := <-results
			switch {
			case l.err == nil:
				l.c.close()
				if marked {
					r.broken.succeed(network, addr, l.step)
				}
			case !marked && r.base.Err() == nil:
				r.markBroken(network, addr, l.step)
			}
		}
	}()
}

// nodeBroken reports whether every protocol the race would try on addr is
// remembered broken.
func (r *racer) nodeBroken(network uint64, addr string, o raceOpts) bool {
	now := r.clk.Now()
	if !r.broken.broken(network, addr, ProtocolTCP, now) {
		return false
	}
	return !r.tryH3(addr, o, now) || r.broken.broken(network, addr, ProtocolH3, now)
}

// tryH3 reports whether the race tries QUIC to addr: over TLS, HTTP/3 not
// disabled, and the node advertised h3 (Alt-Svc, a scheduler answer) or
// RaceConfig.AssumeH3 is set.
func (r *racer) tryH3(addr string, o raceOpts, now time.Time) bool {
	if o.plain || o.noH3 || r.cfg.DisableH3 {
		return false
	}
	return r.cfg.AssumeH3 || o.h3 || r.alt.advertised(addr, now)
}

func (r *racer) markBroken(network uint64, addr string, s Protocol) {
	r.broken.fail(network, addr, s, r.clk.Now())
	r.m.broken.WithLabelValues(string(s)).Inc()
}

func (r *racer) tlsConfig(sni string, protos ...string) *tls.Config {
	return &tls.Config{ServerName: sni, RootCAs: r.roots, NextProtos: protos, MinVersion: tls.VersionTLS12}
}

func (r *racer) quicConfig() *quic.Config {
	return &quic.Config{HandshakeIdleTimeout: r.cfg.ConnectTimeout, MaxIdleTimeout: 30 * time.Second, KeepAlivePeriod: 15 * time.Second}
}

// dialQUIC completes a QUIC handshake for HTTP/3.
func (r *racer) dialQUIC(ctx context.Context, addr, sni string) (*conn, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := probeUDP(ctx, addr, cancel)
	defer stop()
	qc, err := quic.DialAddr(ctx, addr, r.tlsConfig(sni, http3.NextProtoH3), r.quicConfig())
	if err != nil {
		if cause := context.Cause(ctx); errors.Is(cause, syscall.ECONNREFUSED) {
			// An ICMP port-unreachable: nothing listens for QUIC there.
			return nil, outcome.Wrap(outcome.ConnectRefused, fmt.Errorf("%w: %s: %w", ErrUDPRefused, addr, cause))
		}
		if errors.Is(err, context.Canceled) {
			return nil, err
		}
		return nil, outcome.Wrap(outcome.QUICHandshake, err)
	}
	return &conn{step: ProtocolH3, proto: "h3", quic: qc}, nil
}

// dialTCP dials TCP and, with useTLS, completes a TLS handshake offering h2
// and http/1.1.
func (r *racer) dialTCP(ctx context.Context, addr, sni string, useTLS bool) (*conn, error) {
	raw, err := r.dial(ctx, "tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.ECONNRESET) && outcome.ClassifyError(err) == outcome.NetworkOther {
			// A reset during connect is a refusal: nothing was sent.
			// (outcome.ClassifyError leaves it NetworkOther.)
			err = outcome.Wrap(outcome.ConnectRefused, err)
		}
		return nil, err
	}
	if !useTLS {
		return &conn{step: ProtocolTCP, proto: "http/1.1", tcp: raw}, nil
	}
	tc := tls.Client(raw, r.tlsConfig(sni, "h2", "http/1.1"))
	if err := tc.HandshakeContext(ctx); err != nil {
		raw.Close()
		if outcome.ClassifyError(err) == outcome.NetworkOther {
			err = outcome.Wrap(outcome.TLSHandshake, err)
		}
		return nil, fmt.Errorf("tls handshake with %s: %w", addr, err)
	}
	proto := tc.ConnectionState().NegotiatedProtocol
	if proto == "" {
		proto = "http/1.1"
	}
	return &conn{step: ProtocolTCP, proto: proto, tcp: tc}, nil
}

func errorsAs[T any](err error, target *T) bool { return errors.As(err, target) }
