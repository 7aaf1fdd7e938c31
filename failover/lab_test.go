package failover

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// lab is a small loopback network: each test domain is served by a real
// HTTP server on its own 127.0.0.x address, and the client's dialer maps the
// domain names to those addresses. A domain that is "down" has its server
// closed, so dials get a real ECONNREFUSED; a "tunnel" sends every dial to a
// closed port.
type lab struct {
	t       *testing.T
	mu      sync.Mutex
	ips     map[string]string // domain -> 127.0.0.x
	addrs   map[string]string // domain -> ip:port of its live server
	servers map[string]*labServer
	dead    string // a closed port
	tunnel  bool
	clients []*http.Transport
	tls     *tls.Config // servers speak TLS (and HTTP/2) with this config
	roots   *x509.CertPool
}

type labServer struct {
	name string
	h    http.Handler // nil: answer with the name
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []seen
	hold chan struct{}
}

type seen struct {
	host, path, canary, sni string
	proto                   int
}

func newLab(t *testing.T, names ...string) *lab { return newLabTLS(t, false, names...) }

// newLabTLS is newLab whose servers, with withTLS, serve HTTPS and HTTP/2
// with a certificate for all the names, trusted by the lab's clients.
func newLabTLS(t *testing.T, withTLS bool, names ...string) *lab {
	l := &lab{t: t, ips: map[string]string{}, addrs: map[string]string{}, servers: map[string]*labServer{}}
	if withTLS {
		l.tls, l.roots = selfSigned(t, names)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l.dead = ln.Addr().String()
	ln.Close()
	for i, n := range names {
		l.ips[n] = "127.0.0." + strconv.Itoa(2+i)
		l.up(n)
	}
	t.Cleanup(func() {
		for _, c := range l.clients {
			c.CloseIdleConnections()
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, s := range l.servers {
			s.srv.Close()
		}
	})
	return l
}

// up starts a fresh server for name (on a new port of its address).
func (l *lab) up(name string) *labServer { return l.upWith(name, nil) }

// upWith is up with h serving the requests (after they are recorded).
func (l *lab) upWith(name string, h http.Handler) *labServer {
	l.t.Helper()
	ln, err := net.Listen("tcp", l.ips[name]+":0")
	if err != nil {
		l.t.Fatalf("listen for %s: %v", name, err)
	}
	s := &labServer{name: name, h: h}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.Listener.Close()
	s.srv.Listener = ln
	if l.tls != nil {
		s.srv.TLS = l.tls
		s.srv.EnableHTTP2 = true
		s.srv.StartTLS()
	} else {
		s.srv.Start()
	}
	l.mu.Lock()
	if old := l.servers[name]; old != nil {
		old.srv.Close()
	}
	l.servers[name] = s
	l.addrs[name] = ln.Addr().String()
	l.mu.Unlock()
	return s
}

// down closes name's server: its connections drop and new dials are refused.
func (l *lab) down(name string) {
	l.mu.Lock()
	s := l.servers[name]
	l.mu.Unlock()
	s.srv.Close()
}

// blackhole replaces name's server by a listener that accepts connections
// and never answers: requests to it time out.
func (l *lab) blackhole(name string) {
	l.t.Helper()
	ln, err := net.Listen("tcp", l.ips[name]+":0")
	if err != nil {
		l.t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	l.t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	l.down(name)
	l.mu.Lock()
	l.addrs[name] = ln.Addr().String()
	l.mu.Unlock()
}

// setTunnel cuts (or restores) every dial, and drops the clients' idle
// connections as a real loss of network would.
func (l *lab) setTunnel(on bool) {
	l.mu.Lock()
	l.tunnel = on
	l.mu.Unlock()
	for _, c := range l.clients {
		c.CloseIdleConnections()
	}
}

func (l *lab) server(name string) *labServer {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.servers[name]
}

func (l *lab) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	target, ok := l.addrs[host]
	if l.tunnel {
		target = l.dead
	}
	l.mu.Unlock()
	if !ok {
		return nil, &net.OpError{Op: "dial", Net: network, Err: &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}}
	}
	var d net.Dialer
	return d.DialContext(ctx, network, target)
}

// client returns a real http.Transport dialing through the lab.
func (l *lab) client() *http.Transport {
	tr := &http.Transport{DialContext: l.dial, MaxIdleConnsPerHost: 8}
	if l.roots != nil {
		tr.TLSClientConfig = &tls.Config{RootCAs: l.roots}
		tr.ForceAttemptHTTP2 = true
	}
	l.clients = append(l.clients, tr)
	return tr
}

func (s *labServer) serve(w http.ResponseWriter, r *http.Request) {
	v := seen{host: r.Host, path: r.URL.Path, canary: r.Header.Get(CanaryHeader), proto: r.ProtoMajor}
	if r.TLS != nil {
		v.sni = r.TLS.ServerName
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, v)
	hold := s.hold
	s.mu.Unlock()
	if hold != nil && v.canary != "" {
		hold <- struct{}{} // tell the test the canary arrived ...
		<-hold             // ... and wait for its go-ahead
	}
	if s.h != nil {
		s.h.ServeHTTP(w, r)
		return
	}
	io.WriteString(w, s.name)
}

// holdCanaries makes the server keep each canary until the test lets it go:
// a receive on the returned channel waits for a canary to arrive, a send
// releases it.
func (s *labServer) holdCanaries() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold = make(chan struct{})
	return s.hold
}

func (s *labServer) seen() []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seen(nil), s.reqs...)
}

func (s *labServer) canaries() []seen {
	var out []seen
	for _, v := range s.seen() {
		if v.canary != "" {
			out = append(out, v)
		}
	}
	return out
}

// get sends a GET and returns the body (the name of the server that
// answered) or the error.
func get(c *http.Client, url string) (string, error) {
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func mustGet(t *testing.T, c *http.Client, url, want string) {
	t.Helper()
	got, err := get(c, url)
	if err != nil || got != want {
		t.Fatalf("GET %s: %q, %v; want an answer from %s", url, got, err, want)
	}
}

func mustFail(t *testing.T, c *http.Client, url string) {
	t.Helper()
	if got, err := get(c, url); err == nil {
		t.Fatalf("GET %s: answered by %q, want a network error", url, got)
	}
}

// waitTimeout bounds every wait on another goroutine; it is far above what
// a loopback round trip needs, so it only fires when something is broken.
const waitTimeout = 20 * time.Second

type events chan Event

func (ev events) on(e Event) { ev <- e }

// next returns the next transition, failing the test after waitTimeout.
func (ev events) next(t *testing.T) Event {
	t.Helper()
	select {
	case e := <-ev:
		return e
	case <-time.After(waitTimeout):
		t.Fatalf("no transition within %v", waitTimeout)
	}
	return Event{}
}

func (ev events) want(t *testing.T, from, to State, r Reason, domain string) {
	t.Helper()
	e := ev.next(t)
	if e.From != from || e.To != to || e.Reason != r || e.Domain != domain {
		t.Fatalf("transition %v->%v (%v) to %s, want %v->%v (%v) to %s", e.From, e.To, e.Reason, e.Domain, from, to, r, domain)
	}
}

// none checks that no transition is pending.
func (ev events) none(t *testing.T) {
	t.Helper()
	select {
	case e := <-ev:
		t.Fatalf("unexpected transition %v->%v (%v) to %s", e.From, e.To, e.Reason, e.Domain)
	default:
	}
}

type canaries chan string

func (c canaries) on(domain string, r Canary) {
	mark := "ok"
	if !r.OK {
		mark = "fail"
	}
	c <- domain + " " + mark
}

func (c canaries) want(t *testing.T, want ...string) {
	t.Helper()
	for _, w := range want {
		select {
		case got := <-c:
			if got != w {
				t.Fatalf("canary %q, want %q", got, w)
			}
		case <-time.After(waitTimeout):
			t.Fatalf("no canary within %v, want %q", waitTimeout, w)
		}
	}
}

// notifyStore is a real Store that reports each write on a channel, so that
// a test can wait for the write the Transport makes after a transition.
type notifyStore struct {
	Store
	writes chan string
}

// LoadHistory and SaveHistory pass through (the embedded Store is a File).
func (s notifyStore) LoadHistory() ([]NetworkFailure, error) {
	return s.Store.(HistoryStore).LoadHistory()
}
func (s notifyStore) SaveHistory(h []NetworkFailure) error {
	return s.Store.(HistoryStore).SaveHistory(h)
}

func (s notifyStore) Save(d string) error {
	err := s.Store.Save(d)
	s.writes <- "save " + d
	return err
}

func (s notifyStore) Clear() error {
	err := s.Store.Clear()
	s.writes <- "clear"
	return err
}

func (s notifyStore) want(t *testing.T, w string) {
	t.Helper()
	select {
	case got := <-s.writes:
		if got != w {
			t.Fatalf("store write %q, want %q", got, w)
		}
	case <-time.After(waitTimeout):
		t.Fatalf("no store write within %v, want %q", waitTimeout, w)
	}
}

// logRecorder is a slog.Handler keeping the records it sees.
type logRecorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.recs = append(h.recs, r)
	h.mu.Unlock()
	return nil
}
func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecorder) WithGroup(string) slog.Handler      { return h }

func (h *logRecorder) warnings() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.recs {
		if r.Level == slog.LevelWarn {
			out = append(out, r.Message)
		}
	}
	return out
}

func hasPrefixAll(list []string, prefix string) bool {
	for _, s := range list {
		if !strings.HasPrefix(s, prefix) {
			return false
		}
	}
	return len(list) > 0
}
