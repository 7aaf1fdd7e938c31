package h1

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// splitReader returns its bytes in two reads: up to split, then the rest
// (an answer whose head arrives in pieces).
type splitReader struct {
	b     []byte
	split int
}

func (r *splitReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := len(r.b)
	if r.split > 0 && r.split < n {
		n = r.split
	}
	n = copy(p, r.b[:n])
	r.b = r.b[n:]
	r.split = 0
	return n, nil
}

// readSteps reads body with a small buffer and records every read's count
// and error, then what the connection holds after it.
func readSteps(body io.Reader, br *bufio.Reader) string {
	var s strings.Builder
	buf := make([]byte, 7)
	for i := 0; i < 1000; i++ {
		n, err := body.Read(buf)
		fmt.Fprintf(&s, "%d %q %v|", n, buf[:n], err)
		if err != nil {
			break
		}
	}
	rest, err := io.ReadAll(br)
	fmt.Fprintf(&s, "rest %q %v", rest, err)
	return s.String()
}

// checkReadResponse compares fastResponse with http.ReadResponse on data
// arriving in two pieces: when fastResponse takes an answer, it is the
// Response http.ReadResponse makes, with the same body reads and bytes
// left on the connection; when it does not, it consumed nothing.
func checkReadResponse(t *testing.T, data []byte, split int, method string) (took bool) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://x/", nil)
	br := bufio.NewReaderSize(&splitReader{b: data, split: split}, 4096)
	if _, err := br.Peek(1); err != nil {
		return false
	}
	before := br.Buffered()
	own := fastResponse(br, req)
	if own == nil {
		if br.Buffered() != before {
			t.Fatalf("%q: not taken, but %d bytes consumed", data, before-br.Buffered())
		}
		return false
	}
	rbr := bufio.NewReaderSize(&splitReader{b: data, split: split}, 4096)
	ref, err := http.ReadResponse(rbr, req)
	if err != nil {
		t.Fatalf("%q: taken, but http.ReadResponse fails: %v", data, err)
	}
	got := own.resp
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"Status", got.Status, ref.Status}, {"StatusCode", got.StatusCode, ref.StatusCode},
		{"Proto", got.Proto, ref.Proto}, {"ProtoMajor", got.ProtoMajor, ref.ProtoMajor},
		{"ProtoMinor", got.ProtoMinor, ref.ProtoMinor}, {"Header", got.Header, ref.Header},
		{"ContentLength", got.ContentLength, ref.ContentLength}, {"Close", got.Close, ref.Close},
		{"TransferEncoding", got.TransferEncoding, ref.TransferEncoding}, {"Trailer", got.Trailer, ref.Trailer},
		{"NoBody", got.Body == http.NoBody, ref.Body == http.NoBody}, {"Request", got.Request, ref.Request},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Fatalf("%q: %s %#v, http.ReadResponse %#v", data, c.what, c.got, c.want)
		}
	}
	if g, w := readSteps(got.Body, br), readSteps(ref.Body, rbr); g != w {
		t.Fatalf("%q: body reads\n%s\nhttp.ReadResponse's\n%s", data, g, w)
	}
	return true
}

// TestReadResponse: the common answers are taken, whole or in pieces, and
// read as http.ReadResponse reads them; every other kind is left to it.
func TestReadResponse(t *testing.T) {
	taken := []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Type: text/plain\r\n\r\nabc",
		"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 404\r\nContent-Length: 2\r\n\r\nnoEXTRA",
		"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 5\r\nx-lower: a\r\nX-Lower: b\r\n\r\nshort", // canonical keys, both values
		"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",                                             // ends early
		"HTTP/1.1 200 OK\nContent-Length: 1\n\nx",                                                        // bare LF
		"HTTP/1.1 200 OK\r\nContent-Length: 007\r\nX-Folded: a\r\n b\r\n\r\nabcdefg",
		"HTTP/1.1 299 Whatever  it says\r\nContent-Length: 1\r\n\r\nx",
	}
	left := []string{
		"HTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.1 304 Not Modified\r\nContent-Length: 3\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx",
		"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\n",
		"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTrailer: X-T\r\n\r\nx",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nPragma: no-cache\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\n\r\nto the end",
		"HTTP/1.1  200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 2000 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nBad Key: v\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n", // head not complete
	}
	for _, s := range taken {
		for _, split := range []int{0, 1, 10, len(s) - 1} {
			want := split == 0 || split >= strings.Index(s, "\n\n")+2 && strings.Contains(s, "\n\n") || split >= strings.Index(s, "\r\n\r\n")+4 && strings.Contains(s, "\r\n\r\n")
			if got := checkReadResponse(t, []byte(s), split, http.MethodGet); got != want {
				t.Errorf("%q split at %d: taken %v, want %v", s, split, got, want)
			}
		}
		if checkReadResponse(t, []byte(s), 0, http.MethodHead) {
			t.Errorf("%q: the answer to a HEAD taken", s)
		}
	}
	for _, s := range left {
		if checkReadResponse(t, []byte(s), 0, http.MethodGet) {
			t.Errorf("%q: taken", s)
		}
	}
}

// FuzzReadResponse holds fastResponse to http.ReadResponse on arbitrary
// bytes: an answer it takes is read as http.ReadResponse reads it (see
// checkReadResponse).
func FuzzReadResponse(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Type: text/plain\r\n\r\nabc",
		"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
		"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nX-Folded: a\r\n\tb\r\n\r\nx",
		"HTTP/1.1 404 \r\ncontent-length: 2\r\nx-a:  v \r\n\r\nnope",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
		"HTTP/1.1 200 OK\nContent-Length: 1\n\nx",
	} {
		f.Add([]byte(s), 0, false)
		f.Add([]byte(s), 20, true)
	}
	f.Fuzz(func(t *testing.T, data []byte, split int, head bool) {
		method := http.MethodGet
		if head {
			method = http.MethodHead
		}
		checkReadResponse(t, data, split, method)
	})
}

// BenchmarkReadResponse: the common answer read by fastResponse and by
// http.ReadResponse.
func BenchmarkReadResponse(b *testing.B) {
	data := []byte("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Type: text/plain; charset=utf-8\r\nDate: Mon, 07 Dec 2026 01:00:00 GMT\r\n\r\nok\n")
	req, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
	for _, c := range []struct {
		name string
		read func(*bufio.Reader) io.Reader
	}{
		{"own", func(br *bufio.Reader) io.Reader { return &fastResponse(br, req).body }},
		{"net-http", func(br *bufio.Reader) io.Reader {
			resp, err := http.ReadResponse(br, req)
			if err != nil {
				b.Fatal(err)
			}
			return resp.Body
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			r := bytes.NewReader(data)
			br := bufio.NewReaderSize(r, 4096)
			var buf [16]byte
			for b.Loop() {
				r.Reset(data)
				br.Reset(r)
				_, _ = br.Peek(1)
				body := c.read(br)
				if n, _ := io.ReadFull(body, buf[:3]); n != 3 {
					b.Fatal(n)
				}
			}
		})
	}
}
