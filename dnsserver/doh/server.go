package doh

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/quic-go/quic-go/http3"

	"github.com/veerhq/veer/dnsserver"
	"github.com/veerhq/veer/internal/listenpair"
	"github.com/veerhq/veer/obs"
)

// Config is the DoH endpoint's part of a dnsserver.Config.
type Config struct {
	// Listen is the address of both HTTP/2 (TCP) and HTTP/3 (UDP).
	// Required.
	Listen string
	// Path is the endpoint's path. Default dnsserver.DefaultDoHPath.
	Path string
	// TLS names the certificate files; Options.Certificates replaces them.
	TLS dnsserver.TLSConfig
}

// ConfigFrom takes the DoH fields of c.
func ConfigFrom(c dnsserver.Config) Config {
	return Config{Listen: c.DoHListen, Path: c.DoHPath, TLS: c.TLS}
}

// Options are run-time wiring. The zero value works.
type Options struct {
	// Logger receives serve errors. Default slog.Default().
	Logger *slog.Logger
	// Certificates, if set, are used instead of Config.TLS's files.
	Certificates []tls.Certificate
}

// Server serves DoH over HTTP/2 and HTTP/3 on one port.
type Server struct {
	cfg  Config
	log  *slog.Logger
	tls  *tls.Config
	h2   *http.Server
	h3   *http3.Server
	tcp  net.Listener
	udp  net.PacketConn
	wg   sync.WaitGroup
	once sync.Once
}

// New returns a DoH server answering through a. It loads the certificate;
// Start binds the port.
func New(cfg Config, a Answerer, opts Options) (*Server, error) {
	if cfg.Listen == "" {
		return nil, errors.New("doh: listen address required")
	}
	if cfg.Path == "" {
		cfg.Path = dnsserver.DefaultDoHPath
	}
	certs := opts.Certificates
	if len(certs) == 0 {
		c, err := tls.LoadX509KeyPair(cfg.TLS.Cert, cfg.TLS.Key)
		if err != nil {
			return nil, fmt.Errorf("doh: tls: %w", err)
		}
		certs = []tls.Certificate{c}
	}
	s := &Server{cfg: cfg, log: obs.LoggerOr(opts.Logger)}
	s.tls = &tls.Config{Certificates: certs, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}
	mux := http.NewServeMux()
	mux.Handle(cfg.Path, NewHandler(a))
	s.h3 = &http3.Server{Handler: mux, TLSConfig: http3.ConfigureTLSConfig(s.tls.Clone()), Logger: s.log}
	s.h2 = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.h3.SetQUICHeaders(w.Header())
			mux.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	return s, nil
}

// Start binds TCP and UDP on Listen (with port 0, both get TCP's port) and
// serves until Close.
func (s *Server) Start() error {
	tcp, udp, err := listenpair.Listen(s.cfg.Listen)
	if err != nil {
		return err
	}
	s.tcp, s.udp = tcp, udp
	s.h3.Port = s.tcp.Addr().(*net.TCPAddr).Port
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		if err := s.h2.Serve(tls.NewListener(s.tcp, s.tls)); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Warn("doh: http/2", "err", err)
		}
	}()
	go func() {
		defer s.wg.Done()
		if err := s.h3.Serve(s.udp); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			s.log.Warn("doh: http/3", "err", err)
		}
	}()
	return nil
}

// Addr is the bound address (TCP and UDP), valid after Start.
func (s *Server) Addr() netip.AddrPort { return s.tcp.Addr().(*net.TCPAddr).AddrPort() }

// URL is the endpoint's URL with the bound address.
func (s *Server) URL() string { return "https://" + s.Addr().String() + s.cfg.Path }

// Close stops both servers, waiting briefly for requests in flight.
func (s *Server) Close() error {
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if s.tcp != nil {
			s.h2.Shutdown(ctx)
		}
		s.h3.Shutdown(ctx)
		s.h3.Close()
		if s.udp != nil {
			s.udp.Close()
		}
		s.wg.Wait()
	})
	return nil
}
