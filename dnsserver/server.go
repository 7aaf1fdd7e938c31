package dnsserver

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/obs"
)

// Options are the run-time wiring of a Server. The zero value uses the wall
// clock, slog.Default() and prometheus.DefaultRegisterer.
type Options struct {
	// Clock schedules the health checks.
	Clock clock.Clock
	// Logger receives health changes, reloads and listener errors.
	Logger *slog.Logger
	// Registerer receives the veer_dnsserver_* metrics.
	Registerer prometheus.Registerer
	// OnHealthRound, if set, is called after each round of health checks
	// with the checks that failed (read-only).
	OnHealthRound func(down map[string]bool)
}

// ErrFixed is returned by Apply for a field that cannot change while the
// server runs (a listener); the error names the field.
var ErrFixed = errors.New("cannot change while running; restart to apply")

// ErrClosed is returned by Start after Close.
var ErrClosed = errors.New("dnsserver: closed")

// state is what the query path reads: replaced whole by Apply.
type state struct {
	cfg   Config
	snap  *snapshot
	rrl   *rrl
	cache *answerCache
}

// Server is the authoritative DNS server. New validates and compiles its
// config; Start binds the listeners; Apply and SetData replace the served
// data and limits atomically, while queries keep flowing.
type Server struct {
	fixed  Config
	state  atomic.Pointer[state]
	health *checker
	m      *metrics
	log    *slog.Logger

	mu      sync.Mutex // guards what follows and serialises Apply
	started bool
	closed  atomic.Bool
	udp     *net.UDPConn
	tcp     net.Listener
	dot     net.Listener
	conns   map[net.Conn]struct{}
	sem     chan struct{}
	wg      sync.WaitGroup
}

// New returns a server for cfg, not yet listening. An invalid cfg is an
// error naming each bad field.
func New(cfg Config, opts Options) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults(runtime.GOMAXPROCS(0))
	snap, err := compileData(cfg.Data)
	if err != nil {
		return nil, err
	}
	s := &Server{
		fixed: cfg,
		m:     newMetrics(opts.Registerer),
		log:   obs.LoggerOr(opts.Logger),
		conns: map[net.Conn]struct{}{},
		sem:   make(chan struct{}, cfg.MaxTCPConns),
	}
	s.health = newChecker(clock.Or(opts.Clock), s.log, s.m, opts.OnHealthRound)
	s.state.Store(&state{cfg: cfg, snap: snap, rrl: newRRL(cfg.RRL), cache: newAnswerCache()})
	s.health.set(checksOf(snap), cfg.Health)
	return s, nil
}

// checksOf lists the distinct health checks of snap's access nodes.
func checksOf(s *snapshot) []string {
	var out []string
	for _, z := range s.zones {
		for _, o := range z.names {
			if o.access == nil {
				continue
			}
			for _, n := range o.access.nodes {
				if n.check != "" {
					out = append(out, n.check)
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Apply validates cfg and puts all of it in force, or none of it: the old
// config keeps running when cfg is invalid or changes a listener field
// (ErrFixed, naming the field).
func (s *Server) Apply(cfg Config) error {
	err := s.apply(cfg)
	if err != nil {
		s.m.reloads.WithLabelValues("invalid").Inc()
		s.log.Warn("dnsserver: config rejected, the old one stays in force", "err", err)
		return err
	}
	s.m.reloads.WithLabelValues("ok").Inc()
	return nil
}

func (s *Server) apply(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.withDefaults(runtime.GOMAXPROCS(0))
	var errs []error
	for _, f := range []struct {
		name     string
		old, new any
	}{
		{"listen", s.fixed.Listen, cfg.Listen}, {"udp_workers", s.fixed.UDPWorkers, cfg.UDPWorkers},
		{"max_tcp_conns", s.fixed.MaxTCPConns, cfg.MaxTCPConns}, {"tls", s.fixed.TLS, cfg.TLS},
		{"dot_listen", s.fixed.DoTListen, cfg.DoTListen}, {"doh_listen", s.fixed.DoHListen, cfg.DoHListen},
		{"doh_path", s.fixed.DoHPath, cfg.DoHPath},
	} {
		if f.old != f.new {
			errs = append(errs, config.Field(f.name, "%w", ErrFixed))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	snap, err := compileData(cfg.Data)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.state.Load()
	r := old.rrl
	if cfg.RRL != old.cfg.RRL {
		r = newRRL(cfg.RRL)
	}
	s.state.Store(&state{cfg: cfg, snap: snap, rrl: r, cache: newAnswerCache()})
	if checks := checksOf(snap); !slices.Equal(checks, checksOf(old.snap)) || cfg.Health != old.cfg.Health {
		s.health.set(checks, cfg.Health)
	}
	return nil
}

// SetData replaces the served data (zones, access nodes, regions), keeping
// the rest of the config; the old data stays when d is invalid. A Source
// calls it.
func (s *Server) SetData(d Data) error {
	s.mu.Lock()
	cfg := s.state.Load().cfg
	s.mu.Unlock()
	cfg.Data = d
	return s.Apply(cfg)
}

// Config returns the config in force, with defaults filled in.
func (s *Server) Config() Config { return s.state.Load().cfg }

// Start binds UDP and TCP on Listen (the same port; with port 0 both get
// the port UDP got) and DoT when configured, and serves until Close.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return ErrClosed
	}
	if s.started {
		return errors.New("dnsserver: already started")
	}
	udp, tcp, err := listenPair(s.fixed.Listen)
	if err != nil {
		return err
	}
	s.udp, s.tcp = udp, tcp
	if s.fixed.DoTListen != "" {
		cert, err := tls.LoadX509KeyPair(s.fixed.TLS.Cert, s.fixed.TLS.Key)
		if err != nil {
			udp.Close()
			tcp.Close()
			return fmt.Errorf("dnsserver: tls: %w", err)
		}
		ln, err := net.Listen("tcp", s.fixed.DoTListen)
		if err != nil {
			udp.Close()
			tcp.Close()
			return err
		}
		s.dot = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"dot"}, MinVersion: tls.VersionTLS12})
	}
	s.started = true
	for range s.fixed.UDPWorkers {
		s.wg.Add(1)
		go s.serveUDP()
	}
	s.wg.Add(1)
	go s.serveStream(s.tcp, TCP)
	if s.dot != nil {
		s.wg.Add(1)
		go s.serveStream(s.dot, DoT)
	}
	return nil
}

// udpSocketBuffer is the UDP socket's requested receive and send buffer.
const udpSocketBuffer = 4 << 20

// listenPair binds UDP and TCP on the same address. With port 0 it retries
// a few times when TCP finds UDP's port taken.
func listenPair(addr string) (*net.UDPConn, net.Listener, error) {
	var last error
	for range 8 {
		ua, err := net.ResolveUDPAddr("udp", addr)
		if err != nil {
			return nil, nil, err
		}
		u, err := net.ListenUDP("udp", ua)
		if err != nil {
			return nil, nil, err
		}
		bound := u.LocalAddr().(*net.UDPAddr)
		t, err := net.ListenTCP("tcp", &net.TCPAddr{IP: bound.IP, Port: bound.Port, Zone: bound.Zone})
		if err == nil {
			// Room for bursts while the readers are descheduled; the kernel
			// caps it at net.core.rmem_max / wmem_max.
			_ = u.SetReadBuffer(udpSocketBuffer)
			_ = u.SetWriteBuffer(udpSocketBuffer)
			return u, t, nil
		}
		u.Close()
		last = err
		if ua.Port != 0 {
			break
		}
	}
	return nil, nil, last
}

// Addr is the bound UDP and TCP address (valid after Start).
func (s *Server) Addr() netip.AddrPort {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.udp == nil {
		return netip.AddrPort{}
	}
	return s.udp.LocalAddr().(*net.UDPAddr).AddrPort()
}

// DoTAddr is the bound DNS-over-TLS address, if any (valid after Start).
func (s *Server) DoTAddr() netip.AddrPort {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dot == nil {
		return netip.AddrPort{}
	}
	return s.dot.Addr().(*net.TCPAddr).AddrPort()
}

// Close stops the listeners, closes open connections, stops the health
// checks and waits for every goroutine of the server.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed.Swap(true) {
		s.mu.Unlock()
		return nil
	}
	if s.udp != nil {
		s.udp.Close()
	}
	for _, ln := range []net.Listener{s.tcp, s.dot} {
		if ln != nil {
			ln.Close()
		}
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.health.close()
	s.wg.Wait()
	return nil
}
