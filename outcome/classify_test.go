package outcome_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/veerhq/veer/outcome"
)

// The table below is built from errors produced by real sockets on
// loopback: nothing in it is a hand-made error value.

// closedPort returns an address on which nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// fullBacklog returns the address of a TCP socket that listens with a
// backlog of 0 and never accepts, after filling its accept queue: the kernel
// then drops further SYNs, so a new connect times out (a real blackhole).
func fullBacklog(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	// Fill the accept queue (backlog 0 admits one connection).
	for range 2 {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			t.Cleanup(func() { c.Close() })
		}
	}
	return addr
}

// tcpServer listens on a loopback port and hands each accepted connection
// to handle, on the accept goroutine; cleanup stops accepting, waits, and
// closes the connections handle kept open.
func tcpServer(t *testing.T, handle func(c net.Conn) (keep bool)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var kept []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if handle(c) {
				kept = append(kept, c)
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range kept {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// silentServer accepts connections and never answers.
func silentServer(t *testing.T) string {
	return tcpServer(t, func(net.Conn) bool { return true })
}

// resetServer accepts, reads the request, and closes with RST.
func resetServer(t *testing.T) string {
	return tcpServer(t, func(c net.Conn) bool {
		buf := make([]byte, 4096)
		_, _ = c.Read(buf)
		_ = c.(*net.TCPConn).SetLinger(0)
		c.Close()
		return false
	})
}

// dnsServer runs a real DNS server on loopback UDP answering every query
// with rcode, or never answering when rcode < 0.
func dnsServer(t *testing.T, rcode int) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		if rcode < 0 {
			return // swallow the query
		}
		m := new(dns.Msg)
		m.SetRcode(r, rcode)
		_ = w.WriteMsg(m)
	})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
	return pc.LocalAddr().String()
}

// clientVia returns an HTTP client whose dialer resolves names through the
// DNS server at dnsAddr (or the system when empty). The test's cleanup
// aborts what the client still has under way: net/http finishes a dial, and
// the resolver a lookup, after the request that started it gave up, and
// goleak (main_test.go) would see them outlive the test.
func clientVia(t *testing.T, dnsAddr string, timeout time.Duration) *http.Client {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var conns []net.Conn
	d := &net.Dialer{Timeout: timeout}
	if dnsAddr != "" {
		d.Resolver = &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
			var nd net.Dialer
			c, err := nd.DialContext(ctx, "udp", dnsAddr)
			if err == nil {
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
			return c, err
		}}
	}
	tr := &http.Transport{TLSHandshakeTimeout: timeout, DialContext: func(dctx context.Context, network, addr string) (net.Conn, error) {
		dctx, stop := context.WithCancel(dctx)
		defer stop()
		defer context.AfterFunc(ctx, stop)()
		return d.DialContext(dctx, network, addr)
	}}
	t.Cleanup(func() {
		cancel()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		tr.CloseIdleConnections()
	})
	return &http.Client{Transport: tr}
}

func statusServer(t *testing.T, code int, retryAfter string) string {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(s.Close)
	return s.URL
}

// status returns a test step that GETs from a server answering code (and
// Retry-After retryAfter when not empty).
func status(code int, retryAfter string) func(t *testing.T) (*http.Response, error) {
	return func(t *testing.T) (*http.Response, error) { return http.Get(statusServer(t, code, retryAfter)) }
}

func TestClassifyRealErrors(t *testing.T) {
	tlsSrv := httptest.NewUnstartedServer(http.NotFoundHandler())
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // handshake failures are the point
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)

	tests := []struct {
		name string
		do   func(t *testing.T) (*http.Response, error)
		want outcome.Kind
	}{
		{"connection refused", func(t *testing.T) (*http.Response, error) {
			return clientVia(t, "", time.Second).Get("http://" + closedPort(t) + "/")
		}, outcome.ConnectRefused},
		{"connect timeout (SYN dropped)", func(t *testing.T) (*http.Response, error) {
			return clientVia(t, "", 300*time.Millisecond).Get("http://" + fullBacklog(t) + "/")
		}, outcome.ConnectTimeout},
		{"no response headers before deadline", func(t *testing.T) (*http.Response, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+silentServer(t)+"/", nil)
			return clientVia(t, "", time.Second).Do(req)
		}, outcome.ResponseTimeout},
		{"client timeout awaiting headers", func(t *testing.T) (*http.Response, error) {
			c := clientVia(t, "", time.Second)
			c.Timeout = 300 * time.Millisecond
			return c.Get("http://" + silentServer(t) + "/")
		}, outcome.ResponseTimeout},
		{"connection reset", func(t *testing.T) (*http.Response, error) {
			return clientVia(t, "", time.Second).Get("http://" + resetServer(t) + "/")
		}, outcome.ConnectionReset},
		{"client canceled", func(t *testing.T) (*http.Response, error) {
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+silentServer(t)+"/", nil)
			time.AfterFunc(50*time.Millisecond, cancel)
			return clientVia(t, "", time.Second).Do(req)
		}, outcome.ClientCanceled},
		{"TLS bad certificate", func(t *testing.T) (*http.Response, error) {
			// A generous handshake timeout: the certificate error is the
			// point, not the (separately tested) timeout.
			return clientVia(t, "", 30*time.Second).Get(tlsSrv.URL)
		}, outcome.TLSHandshake},
		{"TLS handshake timeout (no ServerHello)", func(t *testing.T) (*http.Response, error) {
			// TCP connects, the ClientHello is never answered: the request
			// was never sent, so this is no response timeout.
			return clientVia(t, "", 300*time.Millisecond).Get("https://" + silentServer(t) + "/")
		}, outcome.TLSHandshake},
		{"TLS server name mismatch", func(t *testing.T) (*http.Response, error) {
			c := tlsSrv.Client()
			tr := c.Transport.(*http.Transport).Clone()
			tr.TLSClientConfig.ServerName = "not-the-cert.example"
			return (&http.Client{Transport: tr}).Get(tlsSrv.URL)
		}, outcome.TLSHandshake},
		{"DNS NXDOMAIN", func(t *testing.T) (*http.Response, error) {
			return clientVia(t, dnsServer(t, dns.RcodeNameError), time.Second).Get("http://api.veer.test/")
		}, outcome.DNSNotFound},
		{"DNS SERVFAIL", func(t *testing.T) (*http.Response, error) {
			return clientVia(t, dnsServer(t, dns.RcodeServerFailure), time.Second).Get("http://api.veer.test/")
		}, outcome.DNSServerFailure},
		{"DNS timeout", func(t *testing.T) (*http.Response, error) {
			return clientVia(t, dnsServer(t, -1), 300*time.Millisecond).Get("http://api.veer.test/")
		}, outcome.DNSTimeout},
		{"200", status(200, ""), outcome.Success},
		{"404", status(404, ""), outcome.ClientError},
		{"429", status(429, "2"), outcome.Limited},
		{"500", status(500, ""), outcome.ServerError},
		{"503", status(503, "7"), outcome.Overloaded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp, err := tt.do(t)
			if resp != nil {
				resp.Body.Close()
			}
			got := outcome.Classify(resp, err)
			if got.Kind != tt.want {
				t.Fatalf("Classify = %v, want %v (err %#v)", got.Kind, tt.want, err)
			}
			if got.Kind.Network() != (err != nil && got.Kind != outcome.ClientCanceled) {
				t.Fatalf("Network() = %v for %v", got.Kind.Network(), got)
			}
		})
	}
}

func TestClassifyRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	resp := &http.Response{StatusCode: 503, Header: http.Header{"Retry-After": {"7"}}}
	if o := outcome.ClassifyAt(resp, nil, now); o.Kind != outcome.Overloaded || o.RetryAfter != 7*time.Second || o.Status != 503 {
		t.Fatalf("503 Retry-After 7 = %+v", o)
	}
	resp = &http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {now.Add(90 * time.Second).Format(http.TimeFormat)}}}
	if o := outcome.ClassifyAt(resp, nil, now); o.Kind != outcome.Limited || o.RetryAfter != 90*time.Second {
		t.Fatalf("429 Retry-After date = %+v", o)
	}
	for _, v := range []string{"", "-1", "soon", "1.5", "99999999999"} {
		if d, ok := outcome.ParseRetryAfter(v, now); ok {
			t.Errorf("ParseRetryAfter(%q) = %v, true; want false", v, d)
		}
	}
	if d, ok := outcome.ParseRetryAfter(now.Add(-time.Hour).Format(http.TimeFormat), now); !ok || d != 0 {
		t.Errorf("past date = %v, %v; want 0, true", d, ok)
	}
}

// net/http reports a context deadline during the dial like one during the
// wait for headers; Progress tells them apart.
func TestClassifyProgressDeadlines(t *testing.T) {
	tests := []struct {
		name string
		addr func(t *testing.T) string
		want outcome.Kind
	}{
		{"deadline during dial", fullBacklog, outcome.DialCanceled},
		{"deadline awaiting headers", silentServer, outcome.ResponseTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			ctx, p := outcome.WithProgress(ctx)
			req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+tt.addr(t)+"/", nil)
			resp, err := clientVia(t, "", 10*time.Second).Do(req)
			if resp != nil {
				resp.Body.Close()
			}
			if plain := outcome.Classify(resp, err); plain.Kind != outcome.ResponseTimeout {
				t.Fatalf("plain Classify = %v, want response_timeout (net/http cannot tell)", plain.Kind)
			}
			if got := outcome.ClassifyProgress(resp, err, p, time.Now()); got.Kind != tt.want {
				t.Fatalf("ClassifyProgress = %v, want %v", got.Kind, tt.want)
			}
			if p.Wrote() != (tt.want == outcome.ResponseTimeout) {
				t.Fatalf("Wrote() = %v", p.Wrote())
			}
		})
	}
}

type quicErr struct{}

func (quicErr) Error() string { return "timeout: no recent network activity" }

// A reset while connecting (a middlebox answering the SYN or the TLS hello
// with RST) means nothing was sent. No loopback socket produces one on demand,
// so this row is built from the error net.Dialer returns for it.
func TestClassifyResetDuringDial(t *testing.T) {
	err := &url.Error{Op: "Get", URL: "https://x/", Err: &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNRESET}}}
	if k := outcome.ClassifyError(err); k != outcome.ConnectRefused || !k.NotSent() {
		t.Fatalf("reset during dial = %v, want connect_refused", k)
	}
}

func TestClassifyWrappedForeignErrors(t *testing.T) {
	err := fmt.Errorf("dial h3: %w", outcome.Wrap(outcome.QUICHandshake, quicErr{}))
	if k := outcome.ClassifyError(err); k != outcome.QUICHandshake {
		t.Fatalf("wrapped QUIC error = %v", k)
	}
	if !errors.Is(err, quicErr{}) {
		t.Fatal("Wrap hides the original error")
	}
	if k := outcome.ClassifyError(errors.New("something new")); k != outcome.NetworkOther {
		t.Fatalf("unknown error = %v, want network_other", k)
	}
	if o := outcome.Classify(nil, nil); o.Kind != outcome.NetworkOther {
		t.Fatalf("nil, nil = %v", o)
	}
}

func TestKindPredicates(t *testing.T) {
	for _, k := range outcome.Kinds() {
		back, err := outcome.ParseKind(k.String())
		if err != nil || back != k {
			t.Errorf("ParseKind(%q) = %v, %v", k, back, err)
		}
		if k.DNS() && !k.Network() {
			t.Errorf("%v is DNS but not network", k)
		}
		if k.Network() && outcome.HTTPStatus(k) < 500 {
			t.Errorf("network kind %v maps to status %d", k, outcome.HTTPStatus(k))
		}
	}
	if outcome.ConnectionReset.NotSent() || outcome.ResponseTimeout.NotSent() {
		t.Error("a request that may have reached the server is marked NotSent")
	}
	if !outcome.ConnectRefused.NotSent() || !outcome.DNSNotFound.NotSent() {
		t.Error("a request that never left is not marked NotSent")
	}
	if (outcome.Outcome{Kind: outcome.ConnectionReset}).NotSent() || !(outcome.Outcome{Kind: outcome.ConnectionReset, Unwritten: true}).NotSent() {
		t.Error("Outcome.NotSent does not follow Unwritten")
	}
	if _, err := outcome.ParseKind("nope"); err == nil {
		t.Error("ParseKind accepted an unknown name")
	}
	if !strings.HasPrefix(outcome.Kind(200).String(), "kind(") {
		t.Error("out-of-range Kind has no fallback name")
	}
}

func TestGRPCCodes(t *testing.T) {
	tests := []struct {
		code uint32
		want outcome.Kind
	}{
		{0, outcome.Success}, {1, outcome.ClientCanceled}, {4, outcome.ResponseTimeout},
		{8, outcome.Limited}, {14, outcome.Overloaded}, {13, outcome.ServerError},
		{3, outcome.ClientError}, {16, outcome.ClientError}, {99, outcome.ServerError},
	}
	for _, tt := range tests {
		if got := outcome.FromGRPCCode(tt.code); got != tt.want {
			t.Errorf("FromGRPCCode(%d) = %v, want %v", tt.code, got, tt.want)
		}
	}
	for _, k := range []outcome.Kind{outcome.Overloaded, outcome.Limited, outcome.Success, outcome.ClientCanceled} {
		if back := outcome.FromGRPCCode(outcome.GRPCCode(k)); back != k {
			t.Errorf("round trip of %v through gRPC code gave %v", k, back)
		}
	}
}

func TestWriteHTTP(t *testing.T) {
	rec := httptest.NewRecorder()
	outcome.WriteHTTP(rec, outcome.Outcome{Kind: outcome.Overloaded, RetryAfter: 1500 * time.Millisecond}, "endpoint overloaded")
	if rec.Code != 503 || rec.Header().Get("Retry-After") != "2" {
		t.Fatalf("got %d Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
	}
	if want := `{"error":"overloaded","reason":"endpoint overloaded","retry_after_seconds":2}`; strings.TrimSpace(rec.Body.String()) != want {
		t.Fatalf("body %s, want %s", rec.Body, want)
	}
	rec = httptest.NewRecorder()
	outcome.WriteHTTP(rec, outcome.Outcome{Kind: outcome.Limited}, "tenant")
	if rec.Code != 429 || rec.Header().Get("Retry-After") != "1" {
		t.Fatalf("limited: %d %q", rec.Code, rec.Header().Get("Retry-After"))
	}
}
