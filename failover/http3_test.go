package failover

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// h3Lab serves each test domain over real HTTP/3 (QUIC on a UDP socket of
// its own 127.0.0.x address); the client's QUIC dialer maps the domain names
// to those sockets, or to a closed UDP port when a domain is down.
type h3Lab struct {
	t       *testing.T
	mu      sync.Mutex
	addrs   map[string]string
	dead    string
	servers map[string]*h3Server
}

type h3Server struct {
	srv  *http3.Server
	conn net.PacketConn
	mu   sync.Mutex
	reqs []seen
}

func newH3Lab(t *testing.T, names ...string) (*h3Lab, *http3.Transport) {
	tlsConf, roots := selfSigned(t, names)
	l := &h3Lab{t: t, addrs: map[string]string{}, servers: map[string]*h3Server{}}
	dead, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l.dead = dead.LocalAddr().String()
	dead.Close()
	for i, name := range names {
		conn, err := net.ListenPacket("udp", "127.0.0."+strconv.Itoa(2+i)+":0")
		if err != nil {
			t.Fatal(err)
		}
		s := &h3Server{conn: conn}
		s.srv = &http3.Server{
			TLSConfig: http3.ConfigureTLSConfig(tlsConf),
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				v := seen{host: r.Host, path: r.URL.Path, canary: r.Header.Get(CanaryHeader), proto: r.ProtoMajor}
				if r.TLS != nil {
					v.sni = r.TLS.ServerName
				}
				s.mu.Lock()
				s.reqs = append(s.reqs, v)
				s.mu.Unlock()
				io.WriteString(w, name)
			}),
		}
		go s.srv.Serve(conn)
		l.servers[name] = s
		l.addrs[name] = conn.LocalAddr().String()
	}
	client := &http3.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots},
		QUICConfig:      &quic.Config{HandshakeIdleTimeout: time.Second},
		Dial: func(ctx context.Context, addr string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			l.mu.Lock()
			target := l.addrs[host]
			l.mu.Unlock()
			return quic.DialAddrEarly(ctx, target, tc, qc)
		},
	}
	t.Cleanup(func() {
		client.Close()
		for _, s := range l.servers {
			s.srv.Close()
			s.conn.Close()
		}
	})
	return l, client
}

func (l *h3Lab) down(name string) {
	l.mu.Lock()
	l.addrs[name] = l.dead
	l.mu.Unlock()
}

func (s *h3Server) seen() []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seen(nil), s.reqs...)
}

// TestHTTP3: the Transport works over an HTTP/3 round tripper: the rewritten
// authority drives QUIC's TLS server name, and canaries go over HTTP/3 too.
func TestHTTP3(t *testing.T) {
	l, h3 := newH3Lab(t, "primary.test", "dc1.test")
	r := newRigOver(t, h3, filepath.Join(t.TempDir(), "f.json"), func(c *Config) { c.Backups = []string{"dc1.test"} })
	mustGet(t, r.c, "https://primary.test/a", "primary.test")
	if got, want := l.servers["primary.test"].seen(), []seen{{host: "primary.test", path: "/a", sni: "primary.test", proto: 3}}; !slices.Equal(got, want) {
		t.Fatalf("primary saw %+v, want %+v", got, want)
	}
	l.down("primary.test")
	h3.CloseIdleConnections()
	for range 3 {
		mustFail(t, r.c, "https://primary.test/a")
	}
	r.ev.want(t, Primary, Failover, ReasonFailures, "primary.test")
	r.ev.want(t, Failover, Backup, ReasonCanarySuccess, "dc1.test")
	mustGet(t, r.c, "https://primary.test/b", "dc1.test")
	if got, want := l.servers["dc1.test"].seen(), []seen{
		{host: "dc1.test", path: DefaultCanaryPath, canary: "1", sni: "dc1.test", proto: 3},
		{host: "dc1.test", path: "/b", sni: "dc1.test", proto: 3},
	}; !slices.Equal(got, want) {
		t.Fatalf("dc1 saw %+v, want %+v", got, want)
	}
}
