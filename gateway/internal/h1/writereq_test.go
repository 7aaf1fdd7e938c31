package h1

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestWriteRequestRefuses: a field, target, Host or method that would end
// its line or the head early is refused (ErrInvalidRequest) and no head is
// ended; net/http would have repaired it (a CR or LF in a value becomes a
// space, a bad name is dropped, a bad Host is sent empty).
func TestWriteRequestRefuses(t *testing.T) {
	base := func() *http.Request {
		return &http.Request{Method: "GET", URL: &url.URL{Path: "/x"}, Host: "h", Header: http.Header{"Accept": {"*/*"}}}
	}
	for _, tc := range []struct {
		name string
		edit func(r *http.Request)
	}{
		{"CR LF in a value", func(r *http.Request) { r.Header.Set("X-A", "a\r\nX-Injected: 1") }},
		{"LF in a value", func(r *http.Request) { r.Header.Set("X-A", "a\nb") }},
		{"NUL in a value", func(r *http.Request) { r.Header.Set("X-A", "a\x00b") }},
		{"name not a token", func(r *http.Request) { r.Header["X A"] = []string{"v"} }},
		{"CR LF in a name", func(r *http.Request) { r.Header["X\r\nY"] = []string{"v"} }},
		{"empty name", func(r *http.Request) { r.Header[""] = []string{"v"} }},
		{"CR LF in the User-Agent", func(r *http.Request) { r.Header.Set("User-Agent", "a\r\nb: c") }},
		{"CR LF in the Host", func(r *http.Request) { r.Host = "h\r\nX: y" }},
		{"space in the Host", func(r *http.Request) { r.Host = "h x" }},
		{"non-ASCII Host", func(r *http.Request) { r.Host = "bücher.example" }},
		{"method not a token", func(r *http.Request) { r.Method = "GET /smuggled HTTP/1.1\r\n" }},
		{"space in the query", func(r *http.Request) { r.URL.RawQuery = "a HTTP/1.1" }},
		{"control byte in an opaque target", func(r *http.Request) { r.URL.Opaque = "/a\x7f" }},
		{"Transfer-Encoding other than chunked", func(r *http.Request) {
			r.Method, r.Body, r.ContentLength, r.TransferEncoding = "POST", io.NopCloser(strings.NewReader("ab")), 2, []string{"gzip"}
		}},
		{"framing field as a trailer", func(r *http.Request) {
			r.Method, r.Body, r.Trailer = "POST", io.NopCloser(strings.NewReader("ab")), http.Header{"Content-Length": nil}
		}},
		{"CR LF in a trailer", func(r *http.Request) {
			r.Method, r.Body, r.Trailer = "POST", io.NopCloser(strings.NewReader("ab")), http.Header{"X-T": {"a\r\n\r\nGET / HTTP/1.1"}}
		}},
	} {
		r := base()
		tc.edit(r)
		var b bytes.Buffer
		bw := bufio.NewWriter(&b)
		err := writeRequest(bw, r)
		_ = bw.Flush()
		if !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%s: err %v, want ErrInvalidRequest", tc.name, err)
		}
		if tc.name != "CR LF in a trailer" && bytes.Contains(b.Bytes(), []byte("\r\n\r\n")) {
			t.Errorf("%s: a whole head was written: %q", tc.name, b.Bytes())
		}
		if bytes.Contains(b.Bytes(), []byte("Injected")) || bytes.Contains(b.Bytes(), []byte("smuggled")) || bytes.Contains(b.Bytes(), []byte("\r\n\r\nGET")) {
			t.Errorf("%s: injected bytes written: %q", tc.name, b.Bytes())
		}
	}
}

// TestWriteRequestShape: the head of a request as the relay sends it, and
// a chunked body with its trailers.
func TestWriteRequestShape(t *testing.T) {
	r := &http.Request{Method: "POST", URL: &url.URL{Path: "/a b", RawQuery: "q=1"}, Host: "[fe80::1%en0]:8080",
		Header: http.Header{"User-Agent": {""}, "X-A": {" padded\t"}}, Body: io.NopCloser(strings.NewReader("abc")), ContentLength: 3, Close: true}
	var b bytes.Buffer
	bw := bufio.NewWriter(&b)
	if err := writeRequest(bw, r); err != nil {
		t.Fatal(err)
	}
	_ = bw.Flush()
	want := "POST /a%20b?q=1 HTTP/1.1\r\nHost: [fe80::1]:8080\r\nConnection: close\r\nContent-Length: 3\r\nX-A: padded\r\n\r\nabc"
	if b.String() != want {
		t.Errorf("got  %q\nwant %q", b.String(), want)
	}
	b.Reset()
	r = &http.Request{Method: "PUT", URL: &url.URL{Path: "/"}, Host: "h", Header: http.Header{},
		Body: io.NopCloser(strings.NewReader("abc")), Trailer: http.Header{"X-Sum": {"9"}}}
	if err := writeRequest(bw, r); err != nil {
		t.Fatal(err)
	}
	_ = bw.Flush()
	want = "PUT / HTTP/1.1\r\nHost: h\r\nUser-Agent: Go-http-client/1.1\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n3\r\nabc\r\n0\r\nX-Sum: 9\r\n\r\n"
	if b.String() != want {
		t.Errorf("got  %q\nwant %q", b.String(), want)
	}
}

// TestClientRefusesInvalidRequest: the client refuses such a request
// before anything reaches the backend, once (not again on a new
// connection), with an error that is ErrInvalidRequest and not
// ErrUnwritten (a retry elsewhere would be refused the same).
func TestClientRefusesInvalidRequest(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan int, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				b, _ := io.ReadAll(c)
				got <- len(b)
			}()
		}
	}()
	tr := &http.Transport{}
	cl := NewClient(tr, (&net.Dialer{}).DialContext, 4)
	defer cl.Close()
	req, _ := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+"/", nil)
	req.Header.Set("X-A", "a\r\nX-Injected: 1")
	_, err = cl.RoundTrip(req)
	if !errors.Is(err, ErrInvalidRequest) || errors.Is(err, ErrUnwritten) {
		t.Fatalf("err %v, want ErrInvalidRequest and not ErrUnwritten", err)
	}
	if n := <-got; n != 0 {
		t.Errorf("backend read %d bytes, want none", n)
	}
}

// BenchmarkWriteRequest: a request as the relay sends it (ten fields),
// written by writeRequest and by (*http.Request).Write.
func BenchmarkWriteRequest(b *testing.B) {
	req := &http.Request{Method: "GET", URL: &url.URL{Path: "/api/v1/items", RawQuery: "page=2"}, Host: "api.example.com", Header: http.Header{
		"Accept": {"*/*"}, "User-Agent": {"hey/0.0.1"}, "X-Forwarded-For": {"203.0.113.9"}, "X-Forwarded-Host": {"api.example.com"},
		"X-Forwarded-Proto": {"http"}, "Forwarded": {"for=203.0.113.9;host=api.example.com;proto=http"}, "Via": {"1.1 veer"},
		"Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}, "Accept-Encoding": {"gzip"}, "Authorization": {"Bearer x"},
	}}
	bw := bufio.NewWriter(io.Discard)
	for _, w := range []struct {
		name  string
		write func() error
	}{{"own", func() error { return writeRequest(bw, req) }}, {"net-http", func() error { return req.Write(bw) }}} {
		b.Run(w.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := w.write(); err != nil {
					b.Fatal(err)
				}
				_ = bw.Flush()
			}
		})
	}
}

// TestValidValue: the word-at-a-time check agrees with the byte check for
// every byte value at every position of values up to 20 bytes long.
func TestValidValue(t *testing.T) {
	for n := 1; n <= 20; n++ {
		for pos := 0; pos < n; pos++ {
			b := []byte(strings.Repeat("a", n))
			for c := 0; c < 256; c++ {
				b[pos] = byte(c)
				want := validHeaderValueByte(byte(c))
				if got := validValue(string(b)); got != want {
					t.Fatalf("%q: %v, want %v", b, got, want)
				}
			}
		}
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte{0, '\t', '\n', '\r', 0x1f, ' ', 'a', '~', 0x7f, 0x80, 0xff}
	for range 20000 {
		b := make([]byte, rnd.IntN(40))
		for i := range b {
			b[i] = alphabet[rnd.IntN(len(alphabet))]
		}
		want := true
		for _, c := range b {
			want = want && validHeaderValueByte(c)
		}
		if got := validValue(string(b)); got != want {
			t.Fatalf("%q: %v, want %v", b, got, want)
		}
	}
	for _, s := range []string{"\t\ttab\tstart and end\t", "\x80\xff\xfe high bytes \xc3\xa9", "a b~c!#$%&'*+-.^_`|~ and more"} {
		if !validValue(s) {
			t.Errorf("%q refused", s)
		}
	}
}
