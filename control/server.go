package control

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"time"

	"github.com/quic-go/quic-go/http3"

	"github.com/veerhq/veer/internal/listenpair"
)

// Addrs are the bound addresses of a started Service.
type Addrs struct {
	// Public serves /v1/route and /v1/schedule over TLS (HTTP/1.1, HTTP/2)
	// on TCP and HTTP/3 on UDP, same port.
	Public string
	// Plain is the optional plain HTTP/1.1 + h2c listener ("" if off).
	Plain string
	// Admin is the admin API.
	Admin string
}

// PublicHandler serves the public API: POST /v1/route, POST /v1/schedule,
// GET /v1/route/key (the signing public key), GET /healthz.
func (s *Service) PublicHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/route", s.serveRoute)
	mux.HandleFunc("/v1/schedule", s.serveSchedule)
	mux.HandleFunc("GET /v1/route/key", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"public_key": PublicKeyString(s.PublicKey())})
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if s.snap.Load() == nil {
			httpError(w, http.StatusServiceUnavailable, ErrNotReady.Error())
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"version": s.snap.Load().version})
	})
	return mux
}

// Start follows the store and starts the listeners; it returns their
// bound addresses. Close stops them.
func (s *Service) Start() (Addrs, error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	tick := s.clk.NewTicker(s.rollEvery)
	go func() {
		defer close(done)
		rdone := make(chan struct{})
		go func() { defer close(rdone); s.runRollouts(ctx, tick) }()
		s.follow(ctx)
		<-rdone
	}()
	s.mu.Lock()
	s.cancel, s.done = cancel, done
	s.mu.Unlock()
	addrs, err := s.listen()
	if err != nil {
		s.Close()
		return Addrs{}, err
	}
	return addrs, nil
}

func (s *Service) listen() (Addrs, error) {
	var a Addrs
	cert, err := s.certificate()
	if err != nil {
		return a, err
	}
	pub := s.PublicHandler()
	// Public: TLS over TCP (h2, http/1.1) and HTTP/3 on the same UDP port.
	ln, pc, err := listenpair.Listen(s.cfg.Listen)
	if err != nil {
		return a, err
	}
	a.Public = ln.Addr().String()
	tlsCfg := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS12}
	hs := &http.Server{Handler: pub, TLSConfig: tlsCfg, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	s.serve(func() error { return hs.ServeTLS(ln, "", "") }, hs.Close)
	h3 := &http3.Server{Handler: pub, TLSConfig: http3.ConfigureTLSConfig(&tls.Config{Certificates: []tls.Certificate{cert}})}
	s.serve(func() error { return h3.Serve(pc) }, func() error { err := h3.Close(); pc.Close(); return err })
	hs.Handler = h3Advertise(h3, pub)
	if s.cfg.ListenPlain != "" {
		pl, err := net.Listen("tcp", s.cfg.ListenPlain)
		if err != nil {
			return a, err
		}
		a.Plain = pl.Addr().String()
		ps := &http.Server{Handler: pub, ReadHeaderTimeout: 10 * time.Second, Protocols: new(http.Protocols)}
		ps.Protocols.SetHTTP1(true)
		ps.Protocols.SetUnencryptedHTTP2(true)
		s.serve(func() error { return ps.Serve(pl) }, ps.Close)
	}
	al, err := net.Listen("tcp", s.cfg.AdminListen)
	if err != nil {
		return a, err
	}
	a.Admin = al.Addr().String()
	admin := s.AdminHandler()
	if s.ui != nil {
		admin = s.ui(admin, s.st)
	}
	as := &http.Server{Handler: admin, ReadHeaderTimeout: 10 * time.Second}
	s.serve(func() error { return as.Serve(al) }, as.Close)
	return a, nil
}

// h3Advertise adds Alt-Svc so that TCP clients learn of HTTP/3.
func h3Advertise(h3 *http3.Server, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h3.SetQUICHeaders(w.Header())
		next.ServeHTTP(w, r)
	})
}

func (s *Service) serve(run func() error, stop func() error) {
	errc := make(chan error, 1)
	go func() { errc <- run() }()
	s.mu.Lock()
	s.servers = append(s.servers, func() error {
		err := stop()
		<-errc // after stop, run's error is shutdown noise
		return err
	})
	s.mu.Unlock()
}

func (s *Service) certificate() (tls.Certificate, error) {
	if s.cfg.CertFile != "" {
		return tls.LoadX509KeyPair(s.cfg.CertFile, s.cfg.KeyFile)
	}
	return selfSigned(s.cfg.DataDir)
}

// Run starts the service and serves until ctx ends.
func (s *Service) Run(ctx context.Context) (Addrs, <-chan error) {
	errc := make(chan error, 1)
	a, err := s.Start()
	if err != nil {
		errc <- err
		return a, errc
	}
	go func() {
		<-ctx.Done()
		errc <- s.Close()
	}()
	return a, errc
}
