package h1

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// memConn is a client connection whose stream is a fixed input; what the
// server writes is kept.
type memConn struct {
	r *bytes.Reader
	w bytes.Buffer
}

func (m *memConn) Read(p []byte) (int, error)         { return m.r.Read(p) }
func (m *memConn) Write(p []byte) (int, error)        { return m.w.Write(p) }
func (m *memConn) Close() error                       { return nil }
func (m *memConn) LocalAddr() net.Addr                { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 80} }
func (m *memConn) RemoteAddr() net.Addr               { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1234} }
func (m *memConn) SetDeadline(t time.Time) error      { return nil }
func (m *memConn) SetReadDeadline(t time.Time) error  { return nil }
func (m *memConn) SetWriteDeadline(t time.Time) error { return nil }

func fuzzHandler(w http.ResponseWriter, r *http.Request) {
	if r.Method == "HEAD" {
		w.Header().Set("Content-Length", "0")
		return
	}
	n, _ := io.Copy(io.Discard, r.Body)
	w.Header().Set("X-Len", strings.Repeat("n", int(n%7)))
	if strings.HasSuffix(r.URL.Path, "f") {
		http.NewResponseController(w).Flush()
		w.Header().Set(http.TrailerPrefix+"X-T", "t")
	}
	_, _ = io.WriteString(w, r.Method+" "+r.URL.Path)
}

// FuzzServer feeds random bytes to the server as a client's stream (through
// the framing check, as the listener wraps it): the server never panics,
// and what it writes is a sequence of well-formed responses.
func FuzzServer(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /a HTTP/1.1\r\nHost: x\r\n\r\nPOST /f HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc\r\nHEAD / HTTP/1.0\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTrailer: X\r\n\r\n3;e\r\nabc\r\n0\r\nX: y\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
		"POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nab",
		"GET http://h/p?q HTTP/1.1\r\nHost: y\r\nX: a\r\n b\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: ws\r\n\r\nGET / HTTP/1.1\r\n\r\n",
		"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",
		"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET / HTTP/1.1\r\n\r\n",
		"\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var logged syncBuf
		s := &Server{Handler: http.HandlerFunc(fuzzHandler), MaxHeaderBytes: 1 << 10, ErrorLog: log.New(&logged, "", 0)}
		m := &memConn{r: bytes.NewReader(in)}
		fc := newFramedConn(m, s.MaxHeaderBytes, nil)
		fc.outer = fc
		s.serveConn(fc)
		if strings.Contains(logged.String(), "panic") {
			t.Fatalf("panic: %s", logged.String())
		}
		out := m.w.Bytes()
		if len(out) > 64*(len(in)+1)+4096 {
			t.Fatalf("%d bytes out for %d in", len(out), len(in))
		}
		br := bufio.NewReader(bytes.NewReader(out))
		for {
			if _, err := br.Peek(1); err == io.EOF {
				return
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("response: %v in %q", err, out)
			}
			if _, err := io.Copy(io.Discard, resp.Body); err != nil {
				t.Fatalf("response body: %v in %q", err, out)
			}
			if resp.Close && resp.StatusCode >= 200 {
				if rest, _ := io.ReadAll(br); len(rest) > 0 {
					t.Fatalf("bytes after a closing response: %q", rest)
				}
				return
			}
		}
	})
}

// netHTTPRead is net/http's server reading one head: http.ReadRequest and
// then the checks of its conn.readRequest.
func netHTTPRead(head string) (*http.Request, bool) {
	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(head)))
	if err != nil {
		return nil, false
	}
	if r.ProtoMajor != 1 && !(r.ProtoMajor == 2 && r.ProtoMinor == 0 && r.Method == "PRI" && r.RequestURI == "*") {
		return nil, false
	}
	// ReadRequest deleted Host: the server's checks need the fields
	tp := textproto.NewReader(bufio.NewReader(strings.NewReader(head)))
	_, _ = tp.ReadLine()
	mh, _ := tp.ReadMIMEHeader()
	hosts := mh["Host"]
	isH2Upgrade := r.Method == "PRI" && len(r.Header) == 0 && r.URL.Path == "*" && r.Proto == "HTTP/2.0"
	if r.ProtoAtLeast(1, 1) && len(hosts) == 0 && !isH2Upgrade && r.Method != "CONNECT" {
		return nil, false
	}
	if len(hosts) == 1 && !validHostHeader(hosts[0]) {
		return nil, false
	}
	for k, vv := range mh {
		if !validMethod(k) { // httpguts.ValidHeaderFieldName: a token
			return nil, false
		}
		for _, v := range vv {
			for i := 0; i < len(v); i++ {
				if !validHeaderValueByte(v[i]) {
					return nil, false
				}
			}
		}
	}
	return r, true
}

// FuzzParseHead compares the server's head parsing with net/http's on
// single heads: both accept or both refuse, and an accepted request has
// the same fields.
func FuzzParseHead(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /a%20b?c=d HTTP/1.1\r\nhost: x\r\naccept-encoding: gzip\r\nX-A: 1\r\nX-A: 2\r\n\r\n",
		"POST http://h:8/p HTTP/1.1\r\nHost: y\r\nContent-Length: 5\r\nConnection: close\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTrailer: a, b\r\n\r\n",
		"CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n",
		"GET / HTTP/1.0\r\nConnection: keep-alive\r\nPragma: no-cache\r\n\r\n",
		"GET / HTTP/1.1\nHost: x\nX: a\n\t b \n\n",
		"GET /p? HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET //x HTTP/1.1\r\nHost: x\r\n\r\n",
		"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, head string) {
		var scan int
		end := headEnd([]byte(head), &scan)
		if end < 0 {
			return
		}
		head = head[:end]
		want, wantOK := netHTTPRead(head)
		got, gotOK := ownRead(head)
		if wantOK != gotOK {
			t.Fatalf("%q: net/http accepts: %v, this server: %v", head, wantOK, gotOK)
		}
		if !wantOK {
			return
		}
		if got.Method != want.Method || got.RequestURI != want.RequestURI || got.Proto != want.Proto ||
			got.Host != want.Host || got.ContentLength != want.ContentLength || got.Close != want.Close ||
			!slices.Equal(got.TransferEncoding, want.TransferEncoding) {
			t.Fatalf("%q:\n got %q %q %q %q %d %v %v\nwant %q %q %q %q %d %v %v", head,
				got.Method, got.RequestURI, got.Proto, got.Host, got.ContentLength, got.Close, got.TransferEncoding,
				want.Method, want.RequestURI, want.Proto, want.Host, want.ContentLength, want.Close, want.TransferEncoding)
		}
		if !reflect.DeepEqual(*got.URL, *want.URL) {
			t.Fatalf("%q: URL %#v, want %#v", head, *got.URL, *want.URL)
		}
		if !reflect.DeepEqual(got.Header, want.Header) || !reflect.DeepEqual(got.Trailer, want.Trailer) {
			t.Fatalf("%q: header %v trailer %v, want %v %v", head, got.Header, got.Trailer, want.Header, want.Trailer)
		}
	})
}

// ownRead is this server's reading of one head, as readRequest does it
// (without the connection).
func ownRead(head string) (*http.Request, bool) {
	c := &conn{srv: &Server{}, rwc: &memConn{r: bytes.NewReader([]byte(head))}}
	c.cr.c = c
	c.ctx = context.Background()
	c.br = bufio.NewReader(&c.cr)
	w, err := c.readRequest(time.Now())
	if err != nil {
		return nil, false
	}
	return w.req, true
}

func TestParseRequestURIMatchesURL(t *testing.T) {
	for _, u := range []string{"/", "/a/b", "/a?b=c", "/a?", "/a%20b", "/a b", "/a\x01", "/a?\x7f", "/~x-y_z.w/$&+,:;=@", "/!", "//x", "*", "http://h/p", "/a?b?c", "/é"} {
		got, gerr := parseRequestURI("GET", u)
		want, werr := url.ParseRequestURI(u)
		if (gerr == nil) != (werr == nil) || gerr == nil && !reflect.DeepEqual(*got, *want) {
			t.Errorf("%q: got %#v %v, want %#v %v", u, got, gerr, want, werr)
		}
	}
}
