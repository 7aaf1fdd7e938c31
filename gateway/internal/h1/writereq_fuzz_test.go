package h1

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// fuzzRequest builds the request a FuzzWriteRequest input describes.
// header and trailer hold fields separated by \x1e, each "name\x1fvalue";
// bodyMode: 0 no body (nil), 1 http.NoBody, 2 ContentLength exact, 3
// unknown length (ContentLength 0), 4 ContentLength one too many, 5 one
// too few.
func fuzzRequest(method, target, host, header, trailer string, body []byte, bodyMode uint8, close bool) (*http.Request, bool) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, false
	}
	req := &http.Request{Method: method, URL: u, Host: host, Header: fields(header), Close: close}
	if trailer != "" {
		req.Trailer = fields(trailer)
	}
	switch bodyMode % 6 {
	case 0:
	case 1:
		req.Body = http.NoBody
	case 2:
		req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	case 3:
		req.Body = io.NopCloser(bytes.NewReader(body))
	case 4:
		req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))+1
	case 5:
		req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))-1
	}
	return req, true
}

func fields(s string) http.Header {
	h := http.Header{}
	for _, f := range strings.Split(s, "\x1e") {
		if f == "" {
			continue
		}
		k, v, _ := strings.Cut(f, "\x1f")
		h[k] = append(h[k], v)
	}
	return h
}

// FuzzWriteRequest writes random requests with writeRequest and with
// (*http.Request).Write, parses both with http.ReadRequest, and requires:
// what writeRequest refuses is its choice (it is stricter: see its
// comment); what it writes net/http writes too; what it writes parses whole,
// with nothing after it (no second request smuggled in), as net/http's
// does; and both parse to the same method, target, Host, header fields
// (User-Agent included: both send Go's when the header has none), Close,
// body and trailers. One difference is allowed and checked as such: a
// body of unknown length on a method that usually has none (GET, HEAD,
// DELETE, OPTIONS, PROPFIND, SEARCH) that is empty: net/http probes it
// and sends nothing (its announced trailers with no chunked body to carry
// them), writeRequest sends an empty chunked body with the trailers.
func FuzzWriteRequest(f *testing.F) {
	f.Add("GET", "/a/b?c=d", "example.com", "Accept\x1f*/*\x1eX-A\x1f1\x1eX-A\x1f2", "", []byte(nil), uint8(0), false)
	f.Add("POST", "/submit", "example.com:8080", "Content-Type\x1ftext/plain\x1eUser-Agent\x1f", "", []byte("hello"), uint8(2), false)
	f.Add("PUT", "/x", "h", "", "X-Sum\x1fabc", []byte("streamed body"), uint8(3), true)
	f.Add("POST", "/x", "h", "", "", []byte(nil), uint8(1), false)
	f.Add("DELETE", "/x", "[fe80::1%25en0]:80", "Connection\x1fclose", "", []byte("abc"), uint8(4), true)
	f.Add("GET", "/x", "h", "X-Bad\x1fa\r\nX-Injected: 1", "", []byte(nil), uint8(0), false)
	f.Add("GET", "/x", "h", "X-Nul\x1fa\x00b", "", []byte(nil), uint8(0), false)
	f.Add("GET", "/x", "h", "Bad Name\x1fv", "", []byte(nil), uint8(0), false)
	f.Add("GET", "/x", "h\r\nX: y", "", "", []byte(nil), uint8(0), false)
	f.Add("GET", "/x?a b", "h", "", "", []byte(nil), uint8(0), false)
	f.Add("OPTIONS", "*", "h", "user-agent\x1fx\x1ehost\x1fy", "", []byte("z"), uint8(5), false)
	f.Add("GET", "/x", "h", "", "Content-Length\x1f1", []byte("b"), uint8(3), false)
	f.Fuzz(func(t *testing.T, method, target, host, header, trailer string, body []byte, bodyMode uint8, close bool) {
		mine, ok := fuzzRequest(method, target, host, header, trailer, body, bodyMode, close)
		if !ok {
			return
		}
		theirs, _ := fuzzRequest(method, target, host, header, trailer, body, bodyMode, close)
		checkWrite(t, mine, nil, theirs, method, header, body, bodyMode)
	})
}

// FuzzWriteRequestExtra is FuzzWriteRequest with some of the fields given
// as extra fields (writeRequestWith; extra holds them as header does,
// their names canonical and not in header): the request is written as if
// they were in its header.
func FuzzWriteRequestExtra(f *testing.F) {
	f.Add("GET", "/a", "example.com", "Accept\x1f*/*", "X-Forwarded-For\x1f192.0.2.1\x1eVia\x1f1.1 a\x1eVia\x1f1.1 veer\x1eUser-Agent\x1f", []byte(nil), uint8(0), false)
	f.Add("POST", "/a", "h", "User-Agent\x1fcurl", "Connection\x1fclose\x1eX-Bad\x1fa\nb", []byte("xy"), uint8(2), true)
	f.Add("GET", "/a", "h", "", "Connection\x1fkeep-alive", []byte(nil), uint8(0), true)
	f.Fuzz(func(t *testing.T, method, target, host, header, extra string, body []byte, bodyMode uint8, close bool) {
		mine, ok := fuzzRequest(method, target, host, header, "", body, bodyMode, close)
		if !ok {
			return
		}
		theirs, _ := fuzzRequest(method, target, host, header, "", body, bodyMode, close)
		var ef []Field
		for k, vv := range fields(extra) {
			k = http.CanonicalHeaderKey(k)
			if slices.ContainsFunc(slices.Collect(maps.Keys(mine.Header)), func(hk string) bool { return http.CanonicalHeaderKey(hk) == k }) ||
				slices.ContainsFunc(ef, func(f Field) bool { return f.Key == k }) {
				continue
			}
			ef = append(ef, Field{k, vv})
			theirs.Header[k] = vv
		}
		checkWrite(t, mine, ef, theirs, method, header+"\x1e"+extra, body, bodyMode)
	})
}

// checkWrite is the check of FuzzWriteRequest: mine with extra written by
// writeRequestWith against theirs written by net/http.
func checkWrite(t *testing.T, mine *http.Request, extra []Field, theirs *http.Request, method, header string, body []byte, bodyMode uint8) {
	t.Helper()
	{
		var mb, tb bytes.Buffer
		bw := bufio.NewWriter(&mb)
		merr := writeRequestWith(bw, mine, extra)
		if merr == nil {
			merr = bw.Flush()
		}
		terr := theirs.Write(&tb)
		if merr != nil {
			if errors.Is(merr, ErrInvalidRequest) && bytes.Contains(mb.Bytes(), []byte("\r\n\r\n")) {
				// a head longer than the buffer may have been partly flushed, never ended
				t.Fatalf("refused (%v) after a whole head was flushed: %q", merr, mb.Bytes())
			}
			return // refused: writeRequest is stricter than net/http
		}
		if terr != nil {
			t.Fatalf("writeRequest wrote what net/http refuses (%v): %q", terr, mb.Bytes())
		}
		mbr := bufio.NewReader(bytes.NewReader(mb.Bytes()))
		mp, mperr := http.ReadRequest(mbr)
		tp, tperr := http.ReadRequest(bufio.NewReader(bytes.NewReader(tb.Bytes())))
		if mperr != nil || tperr != nil {
			if mperr != nil && tperr != nil {
				return // both wrote the same unparseable request (e.g. a header field twice that must be once)
			}
			t.Fatalf("parse: ours %v, net/http's %v\nours   %q\ntheirs %q", mperr, tperr, mb.Bytes(), tb.Bytes())
		}
		mbody, merr := io.ReadAll(mp.Body)
		tbody, terr := io.ReadAll(tp.Body)
		if (merr == nil) != (terr == nil) {
			t.Fatalf("body read: ours %v, net/http's %v\nours   %q\ntheirs %q", merr, terr, mb.Bytes(), tb.Bytes())
		}
		if merr != nil {
			return
		}
		if _, err := mbr.Peek(1); err != io.EOF {
			t.Fatalf("bytes after our request: %q", mb.Bytes())
		}
		m := method
		if m == "" {
			m = http.MethodGet
		}
		probed := bodyMode%6 == 3 && len(body) == 0 && slices.Contains([]string{"GET", "HEAD", "DELETE", "OPTIONS", "PROPFIND", "SEARCH"}, m)
		if probed {
			delete(mp.Header, "Trailer")
			delete(tp.Header, "Trailer")
		}
		sortCollisions(mp.Header, header)
		sortCollisions(tp.Header, header)
		switch {
		case mp.Method != tp.Method, mp.RequestURI != tp.RequestURI, mp.Host != tp.Host, mp.Close != tp.Close:
			t.Fatalf("request line or Host differ:\nours   %q\ntheirs %q", mb.Bytes(), tb.Bytes())
		case !reflect.DeepEqual(mp.Header, tp.Header):
			t.Fatalf("headers differ: %v / %v\nours   %q\ntheirs %q", mp.Header, tp.Header, mb.Bytes(), tb.Bytes())
		case !bytes.Equal(mbody, tbody):
			t.Fatalf("bodies differ:\nours   %q\ntheirs %q", mb.Bytes(), tb.Bytes())
		case !probed && !reflect.DeepEqual(mp.Trailer, tp.Trailer):
			t.Fatalf("trailers differ: %v / %v\nours   %q\ntheirs %q", mp.Trailer, tp.Trailer, mb.Bytes(), tb.Bytes())
		}
	}
}

// sortCollisions sorts the values of the fields whose names the fuzz input
// spelt more than one way ("x-a" and "X-A"): each writer writes them in its
// own map order.
func sortCollisions(h http.Header, spec string) {
	spellings := map[string]map[string]bool{}
	for k := range fields(spec) {
		c := http.CanonicalHeaderKey(k)
		if spellings[c] == nil {
			spellings[c] = map[string]bool{}
		}
		spellings[c][k] = true
	}
	for c, s := range spellings {
		if len(s) > 1 || c == "User-Agent" || c == "Host" {
			slices.Sort(h[c])
		}
	}
}
