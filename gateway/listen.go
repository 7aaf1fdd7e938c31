package gateway

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/veerhq/veer/gateway/internal/h1"
)

// HTTP3Server is a running HTTP/3 listener.
type HTTP3Server interface {
	// Shutdown sends GOAWAY and waits for in-flight requests until ctx
	// ends.
	Shutdown(ctx context.Context) error
	Close() error
}

// HTTP3Func starts an HTTP/3 listener on the UDP address addr serving h
// with tlsConf; gateway/gatewayh3.Listen is the implementation.
type HTTP3Func func(addr string, tlsConf *tls.Config, h http.Handler) (HTTP3Server, error)

// servers are the listeners Start started. Each public listener is served
// by two servers: h1.Server for HTTP/1.x, and net/http's for the
// connections that speak HTTP/2 (TLS with h2 negotiated, prior-knowledge
// h2c), which h1.Server hands it.
type servers struct {
	mu      sync.Mutex
	https   *http.Server // HTTP/2 over TLS
	https1  *h1.Server   // HTTP/1.x over TLS
	plain   *http.Server // prior-knowledge h2c
	plain1  *h1.Server   // HTTP/1.x
	admin   *http.Server
	h3      HTTP3Server
	lns     []*h1.Listener // TLS, plain
	addrs   Addrs
	errc    chan error
	started bool
}

// Addrs are the bound addresses, useful when the config asked for port 0.
type Addrs struct {
	TLS, Plain, Admin string
}

// Addrs returns the addresses Start bound.
func (g *Gateway) Addrs() Addrs {
	g.srv.mu.Lock()
	defer g.srv.mu.Unlock()
	return g.srv.addrs
}

// Start binds every configured listener and serves in the background. It
// returns once all are bound (or the first bind error). Errors of a
// running listener are reported by Wait.
func (g *Gateway) Start() error {
	c := g.snap.Load().cfg
	s := &g.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("gateway: already started")
	}
	s.started = true
	s.errc = make(chan error, 4)
	l := c.Listen
	maxHeader := cmp.Or(l.MaxHeaderBytes, http.DefaultMaxHeaderBytes)
	mk := func(h http.Handler) *http.Server {
		return &http.Server{Handler: h, ReadHeaderTimeout: l.ReadHeaderTimeout, ReadTimeout: l.ReadTimeout,
			WriteTimeout: l.WriteTimeout, IdleTimeout: l.IdleTimeout, MaxHeaderBytes: l.MaxHeaderBytes,
			ErrorLog: newServerLog(g.log)}
	}
	serve := func(srv interface{ Serve(net.Listener) error }, ln net.Listener) {
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.errc <- err
			}
		}()
	}
	// serve1 serves HTTP/1.x on ln with h1.Server, HTTP/2 with srv.
	serve1 := func(srv *http.Server, ln *h1.Listener, h2c bool) *h1.Server {
		q := h1.NewConnQueue(ln.Addr())
		s1 := &h1.Server{Handler: srv.Handler, ReadHeaderTimeout: l.ReadHeaderTimeout, ReadTimeout: l.ReadTimeout,
			WriteTimeout: l.WriteTimeout, IdleTimeout: l.IdleTimeout, MaxHeaderBytes: l.MaxHeaderBytes,
			ErrorLog: srv.ErrorLog, HTTP2: q.Deliver, H2C: h2c, Base: srv}
		serve(srv, q)
		serve(s1, ln)
		return s1
	}
	var lns []net.Listener
	fail := func(err error) error {
		for _, ln := range lns {
			_ = ln.Close()
		}
		return err
	}
	if l.Addr != "off" {
		certFile, keyFile := l.CertFile, l.KeyFile
		if certFile == "" {
			var err error
			if certFile, keyFile, err = selfSigned(c.DataDir, g.log); err != nil {
				return fail(err)
			}
		}
		certs, err := newCertStore(certFile, keyFile, g.log)
		if err != nil {
			return fail(fmt.Errorf("listen.cert_file: %w", err))
		}
		ln, err := net.Listen("tcp", l.Addr)
		if err != nil {
			return fail(fmt.Errorf("listen.addr: %w", err))
		}
		lns = append(lns, ln)
		s.addrs.TLS = ln.Addr().String()
		tlsConf := &tls.Config{GetCertificate: certs.get, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}
		h := http.Handler(g)
		if g.opts.HTTP3 != nil && !l.DisableHTTP3 {
			h3, err := g.opts.HTTP3(s.addrs.TLS, tlsConf.Clone(), g)
			if err != nil {
				return fail(fmt.Errorf("listen.addr (udp): %w", err))
			}
			s.h3 = h3
			_, port, _ := net.SplitHostPort(s.addrs.TLS)
			h = altSvc(`h3=":`+port+`"; ma=86400`, g)
		}
		srv := mk(h)
		srv.TLSConfig = tlsConf
		s.https = srv
		cl := h1.NewListener(ln, tlsConf, h1.HandshakeTimeout(l.ReadHeaderTimeout, l.ReadTimeout, l.WriteTimeout), maxHeader, g.refusedFraming, g.log)
		cl.HeaderTimeout = cmp.Or(l.ReadHeaderTimeout, l.ReadTimeout)
		s.lns = append(s.lns, cl)
		s.https1 = serve1(srv, cl, false)
	}
	if l.Plain != "" {
		ln, err := net.Listen("tcp", l.Plain)
		if err != nil {
			return fail(fmt.Errorf("listen.plain: %w", err))
		}
		lns = append(lns, ln)
		s.addrs.Plain = ln.Addr().String()
		srv := mk(g)
		p := new(http.Protocols)
		p.SetHTTP1(true)
		p.SetUnencryptedHTTP2(true)
		srv.Protocols = p
		s.plain = srv
		cl := h1.NewListener(ln, nil, 0, maxHeader, g.refusedFraming, g.log)
		cl.HeaderTimeout = cmp.Or(l.ReadHeaderTimeout, l.ReadTimeout)
		s.lns = append(s.lns, cl)
		s.plain1 = serve1(srv, cl, true)
	}
	if c.Admin.Addr != "" {
		ln, err := net.Listen("tcp", c.Admin.Addr)
		if err != nil {
			return fail(fmt.Errorf("admin.addr: %w", err))
		}
		s.addrs.Admin = ln.Addr().String()
		srv := &http.Server{Handler: g.adminHandler(c.Admin.Token), ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute}
		s.admin = srv
		serve(srv, ln)
	}
	g.log.Info("gateway listening", "tls", s.addrs.TLS, "http3", s.h3 != nil, "plain", s.addrs.Plain, "admin", s.addrs.Admin)
	return nil
}

// refusedFraming counts and logs a request refused by a framedConn.
func (g *Gateway) refusedFraming(c net.Conn, why string) {
	g.m.rejected.WithLabelValues("framing").Inc()
	if ok, left := g.refusalLog.allow(time.Now()); ok {
		g.log.Warn("request refused with 400: ambiguous framing (request smuggling)", "remote", c.RemoteAddr().String(), "why", why, "suppressed_before", left)
	}
}

// Errors reports a listener that stopped with an error.
func (g *Gateway) Errors() <-chan error { return g.srv.errc }

func altSvc(v string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Alt-Svc", v)
		next.ServeHTTP(w, r)
	})
}

// Shutdown drains the gateway: /readyz turns 503 at once, the listeners
// stop accepting, in-flight requests finish until ctx ends (HTTP/3 sends
// GOAWAY), then background work stops. The admin listener closes last.
func (g *Gateway) Shutdown(ctx context.Context) error {
	g.ready.Store(false)
	s := &g.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	var wg sync.WaitGroup
	var emu sync.Mutex
	add := func(err error) {
		if err != nil {
			emu.Lock()
			errs = append(errs, err)
			emu.Unlock()
		}
	}
	var shut []interface{ Shutdown(context.Context) error }
	for _, srv := range []*h1.Server{s.https1, s.plain1} {
		if srv != nil {
			add(srv.StopAccepting()) // before the HTTP/2 servers' OnShutdown hooks run
			shut = append(shut, srv)
		}
	}
	for _, srv := range []*http.Server{s.https, s.plain} {
		if srv != nil {
			shut = append(shut, srv)
		}
	}
	for _, srv := range shut {
		wg.Add(1)
		go func() { defer wg.Done(); add(srv.Shutdown(ctx)) }()
	}
	if s.h3 != nil {
		wg.Add(1)
		go func() { defer wg.Done(); add(s.h3.Shutdown(ctx)); _ = s.h3.Close() }()
	}
	wg.Wait()
	if s.admin != nil {
		add(s.admin.Close())
	}
	g.close()
	return errors.Join(errs...)
}

// Close stops everything at once, without draining.
func (g *Gateway) Close() error {
	g.ready.Store(false)
	s := &g.srv
	s.mu.Lock()
	for _, srv := range []*h1.Server{s.https1, s.plain1} {
		if srv != nil {
			_ = srv.Close()
		}
	}
	for _, srv := range []*http.Server{s.https, s.plain, s.admin} {
		if srv != nil {
			_ = srv.Close()
		}
	}
	if s.h3 != nil {
		_ = s.h3.Close()
	}
	s.mu.Unlock()
	g.close()
	return nil
}

func (g *Gateway) close() {
	g.mu.Lock()
	if g.health != nil {
		g.health.stop()
	}
	t := g.snap.Load()
	g.mu.Unlock()
	for _, c := range t.clusters {
		if tr, ok := c.transport.(interface{ CloseIdleConnections() }); ok {
			tr.CloseIdleConnections()
		}
	}
	if g.shedder != nil {
		g.shedder.Close()
	}
	if cl, ok := g.admitter.(interface{ Close() error }); ok {
		_ = cl.Close()
	}
	g.alog.close()
	g.closeAsync()
}
