package h1

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// ErrInvalidRequest marks a request the client refused to write: a method,
// target, Host, header name or value that HTTP/1.1 cannot carry as it is (a
// CR, LF or NUL that would start a header or a request of its own), or a
// framing it does not send. Nothing of such a request is flushed to the
// connection, which is closed.
var ErrInvalidRequest = errors.New("gateway: request not valid for HTTP/1.1")

type invalidRequestError struct{ what string }

func (e *invalidRequestError) Error() string {
	return "gateway: request not valid for HTTP/1.1: " + e.what
}
func (e *invalidRequestError) Is(target error) bool { return target == ErrInvalidRequest }

func invalid(what string) error { return &invalidRequestError{what} }

// defaultUserAgent is the User-Agent net/http sends for a request whose
// header has none; an empty User-Agent sends none (the gateway's relay sets
// it empty when the client sent none).
const defaultUserAgent = "Go-http-client/1.1"

// Field is a header field an outgoing request carries besides its Header
// (the gateway's relay keeps the fields it sets out of the client's header
// map: no map of its own per request). Key is canonical and is not a key
// of the request's Header.
type Field struct {
	Key    string
	Values []string
}

// writeRequest writes req with the extra fields to bw as HTTP/1.1 (see
// writeRequestWith).
func writeRequest(bw *bufio.Writer, req *http.Request) error {
	return writeRequestWith(bw, req, nil)
}

// writeRequestWith writes req to bw as HTTP/1.1, with the framing
// (*http.Request).Write gives it, without its formatting, sorting and
// per-request allocations: the request line, Host (req.Host, else the
// URL's; an IPv6 zone removed), User-Agent (Go's when the header has none,
// none when it is empty), Connection: close for req.Close, Content-Length or
// Transfer-Encoding: chunked, Trailer (the announced names, sorted; a body
// that is not chunked has no trailers), the
// header fields in map order (values trimmed of surrounding spaces and
// tabs) followed by extra's, which count as header fields for every rule
// here (User-Agent, Connection), then the body: exactly ContentLength bytes, or chunked with the
// trailers after it. Body rules as net/http's: no body (nil or NoBody) is
// Content-Length 0 for POST, PUT and PATCH and nothing otherwise; a body
// with ContentLength 0 is of unknown length and goes chunked (net/http
// probes the body of a GET-like request for emptiness first, with a 200 ms
// timer; this writer does not: such a body is sent chunked, empty or not); a
// body shorter or longer than ContentLength is an error. The body is closed
// in every case, as net/http closes it.
//
// Where net/http would repair what it cannot write (a header name that is
// not a token is dropped, a CR or LF in a value becomes a space, a Host that
// is not valid is sent empty, a non-ASCII Host is converted to Punycode),
// this writer refuses with an error that is ErrInvalidRequest: a request
// is either sent as it was given or not at all. It also refuses what
// net/http refuses (control bytes in the target, Trailer keys that are
// framing fields), and more: a space in the target, a method that is not a
// token, a Transfer-Encoding other than chunked, chunked framing without a
// body or with a ContentLength. A refused head is never ended (a head
// longer than bw's buffer may have been partly flushed): the caller closes
// the connection.
func writeRequestWith(bw *bufio.Writer, req *http.Request, extra []Field) (err error) {
	closed := false
	defer func() {
		if !closed && req.Body != nil {
			if cerr := req.Body.Close(); cerr != nil && err == nil {
				err = cerr
			}
		}
	}()
	if req.URL == nil {
		return invalid("no URL")
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	if !validHostHeader(host) {
		return invalid("Host " + strconv.Quote(host))
	}
	host = removeZone(host)
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	if !validMethod(method) {
		return invalid("method " + strconv.Quote(method))
	}
	// framing
	hasBody := req.Body != nil && req.Body != http.NoBody
	if req.ContentLength != 0 && req.Body == nil {
		return invalid("ContentLength " + strconv.FormatInt(req.ContentLength, 10) + " with no body")
	}
	chunked := false
	switch te := req.TransferEncoding; {
	case len(te) == 0:
	case len(te) == 1 && te[0] == "chunked":
		chunked = true
	default:
		return invalid("Transfer-Encoding " + strconv.Quote(strings.Join(te, ", ")))
	}
	n := int64(0)
	if hasBody {
		n = req.ContentLength
		if n == 0 {
			n = -1
		}
	}
	switch {
	case n < 0 && method == http.MethodConnect:
		return invalid("a CONNECT body")
	case n < 0:
		chunked = true
	case chunked && n > 0:
		return invalid("chunked with a ContentLength")
	case chunked:
		return invalid("chunked without a body")
	}
	var trailerKeys string // only a chunked body carries trailers (net/http drops them otherwise)
	if chunked && len(req.Trailer) > 0 {
		if trailerKeys, err = announce(req.Trailer); err != nil {
			return err
		}
	}
	ua := defaultUserAgent
	if v, ok := field(req.Header, extra, "User-Agent"); ok {
		ua = ""
		if len(v) > 0 {
			ua = v[0]
		}
	}
	if !validValue(ua) {
		return invalid("User-Agent value")
	}

	// the head: nothing above wrote a byte
	bw.WriteString(method)
	bw.WriteByte(' ')
	if err := writeTarget(bw, req, method, host); err != nil {
		return err
	}
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(host)
	bw.WriteString("\r\n")
	if ua = trimWS(ua); ua != "" {
		bw.WriteString("User-Agent: ")
		bw.WriteString(ua)
		bw.WriteString("\r\n")
	}
	if conn, _ := field(req.Header, extra, "Connection"); req.Close && (len(conn) == 0 || !hasSpacedToken(conn[0], "close")) {
		bw.WriteString("Connection: close\r\n")
	}
	switch {
	case chunked:
		bw.WriteString("Transfer-Encoding: chunked\r\n")
	case n > 0 || n == 0 && (method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch):
		// net/http's shouldSendContentLength: many servers expect one for
		// these methods, even 0
		bw.WriteString("Content-Length: ")
		bw.Write(strconv.AppendInt(bw.AvailableBuffer(), n, 10))
		bw.WriteString("\r\n")
	}
	if trailerKeys != "" {
		bw.WriteString("Trailer: ")
		bw.WriteString(trailerKeys)
		bw.WriteString("\r\n")
	}
	for k, vv := range req.Header {
		if err := writeHeadField(bw, k, vv); err != nil {
			return err
		}
	}
	for _, f := range extra {
		if err := writeHeadField(bw, f.Key, f.Values); err != nil {
			return err
		}
	}
	if _, err := bw.WriteString("\r\n"); err != nil {
		return err
	}

	closed = true
	if !hasBody {
		if req.Body != nil {
			return req.Body.Close()
		}
		return nil
	}
	if chunked {
		err = writeChunked(bw, req)
	} else {
		err = writeSized(bw, req.Body, n)
	}
	if cerr := req.Body.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeTarget writes the request target: the URL's request URI (origin
// form), or for a CONNECT without a path the authority.
func writeTarget(bw *bufio.Writer, req *http.Request, method, host string) error {
	u := req.URL
	if method == http.MethodConnect && u.Path == "" {
		t := host
		if u.Opaque != "" {
			t = u.Opaque
		}
		if !validTarget(t) {
			return invalid("target " + strconv.Quote(t))
		}
		bw.WriteString(t)
		return nil
	}
	// (*url.URL).RequestURI, written in pieces
	p := u.Opaque
	if p == "" {
		if p = u.EscapedPath(); p == "" {
			p = "/"
		}
	} else if strings.HasPrefix(p, "//") {
		if !validTarget(u.Scheme) {
			return invalid("target scheme " + strconv.Quote(u.Scheme))
		}
		bw.WriteString(u.Scheme)
		bw.WriteByte(':')
	}
	if !validTarget(p) || !validTarget(u.RawQuery) {
		return invalid("target " + strconv.Quote(p+"?"+u.RawQuery))
	}
	bw.WriteString(p)
	if u.ForceQuery || u.RawQuery != "" {
		bw.WriteByte('?')
		bw.WriteString(u.RawQuery)
	}
	return nil
}

// writeHeadField writes a field of the head unless the head's framing
// lines stand for it.
func writeHeadField(bw *bufio.Writer, k string, vv []string) error {
	switch k {
	case "Host", "User-Agent", "Content-Length", "Transfer-Encoding", "Trailer":
		return nil // written from the request's fields, or not at all
	}
	return writeRequestField(bw, k, vv)
}

// field returns the values of the field k of h, or of extra when h has
// none.
func field(h http.Header, extra []Field, k string) ([]string, bool) {
	if v, ok := h[k]; ok {
		return v, true
	}
	for _, f := range extra {
		if f.Key == k {
			return f.Values, true
		}
	}
	return nil, false
}

// writeRequestField writes the lines of one header field, refusing a name that is
// not a token and a value with a control byte other than a tab.
func writeRequestField(bw *bufio.Writer, k string, vv []string) error {
	if !validMethod(k) {
		return invalid("header name " + strconv.Quote(k))
	}
	for _, v := range vv {
		if !validValue(v) {
			return invalid("value of header " + k)
		}
		v = trimWS(v)
		if len(k)+len(v)+4 <= bw.Available() {
			// one copy into the buffer's free space, not four writes
			b := bw.AvailableBuffer()
			b = append(append(append(append(b, k...), ": "...), v...), "\r\n"...)
			bw.Write(b)
			continue
		}
		bw.WriteString(k)
		bw.WriteString(": ")
		bw.WriteString(v)
		bw.WriteString("\r\n")
	}
	return nil
}

// announce returns the value of the Trailer field for the trailer keys t
// has: canonical, sorted, joined by commas (net/http's).
func announce(t http.Header) (string, error) {
	keys := make([]string, 0, len(t))
	for k := range t {
		k = http.CanonicalHeaderKey(k)
		switch k {
		case "Transfer-Encoding", "Trailer", "Content-Length":
			return "", invalid("Trailer key " + k)
		}
		if !validMethod(k) {
			return "", invalid("Trailer key " + strconv.Quote(k))
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return strings.Join(keys, ","), nil
}

// writeSized writes exactly n bytes of body, straight into bw's buffer,
// and fails when the body is shorter or longer.
func writeSized(bw *bufio.Writer, body io.Reader, n int64) error {
	left := n
	for left > 0 {
		if bw.Available() == 0 {
			if err := bw.Flush(); err != nil {
				return err
			}
		}
		p := bw.AvailableBuffer()[:min(int64(bw.Available()), left)]
		nr, rerr := body.Read(p)
		if nr > 0 {
			bw.Write(p[:nr]) // in place: no copy
			left -= int64(nr)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	extra := 0
	if left == 0 {
		var one [1]byte
		for extra == 0 {
			nr, rerr := body.Read(one[:])
			extra += nr
			if rerr != nil {
				if rerr != io.EOF {
					return rerr
				}
				break
			}
		}
	}
	if left != 0 || extra != 0 {
		return errors.New("gateway: ContentLength " + strconv.FormatInt(n, 10) + " does not match the body")
	}
	return nil
}

var chunkBufs = sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}

// writeChunked writes the body in chunks, flushing each (the body may be a
// stream), then the last chunk with req's trailers.
func writeChunked(bw *bufio.Writer, req *http.Request) error {
	if err := bw.Flush(); err != nil {
		return err
	}
	bp := chunkBufs.Get().(*[]byte)
	defer chunkBufs.Put(bp)
	buf := *bp
	for {
		nr, rerr := req.Body.Read(buf)
		if nr > 0 {
			bw.Write(strconv.AppendInt(bw.AvailableBuffer(), int64(nr), 16))
			bw.WriteString("\r\n")
			bw.Write(buf[:nr])
			bw.WriteString("\r\n")
			if err := bw.Flush(); err != nil {
				return err
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	bw.WriteString("0\r\n")
	for k, vv := range req.Trailer { // filled by now: a body's reader sets them at its end
		if err := writeRequestField(bw, k, vv); err != nil {
			return err
		}
	}
	_, err := bw.WriteString("\r\n")
	return err
}

// hasSpacedToken is net/http's hasToken, which its request writer uses:
// whether the comma- or space-separated v holds token (lower case), ASCII
// case-insensitively (hasToken, the server's, splits at commas only).
func hasSpacedToken(v, token string) bool {
	if len(token) > len(v) || token == "" {
		return false
	}
	if v == token {
		return true
	}
	for sp := 0; sp <= len(v)-len(token); sp++ {
		if b := v[sp]; b != token[0] && b|0x20 != token[0] {
			continue
		}
		if sp > 0 && !tokenBoundary(v[sp-1]) {
			continue
		}
		if end := sp + len(token); end != len(v) && !tokenBoundary(v[end]) {
			continue
		}
		if strings.EqualFold(v[sp:sp+len(token)], token) {
			return true
		}
	}
	return false
}

func tokenBoundary(b byte) bool { return b == ' ' || b == ',' || b == '\t' }

// removeZone removes an IPv6 zone from a bracketed host (RFC 6874: an
// intermediary removes it from an outgoing URI).
func removeZone(host string) string {
	if !strings.HasPrefix(host, "[") {
		return host
	}
	i := strings.LastIndex(host, "]")
	if i < 0 {
		return host
	}
	j := strings.LastIndex(host[:i], "%")
	if j <= 0 {
		return host
	}
	return host[:j] + host[i:]
}

// validValue reports whether a field value has no control byte other than
// a tab (httpguts.ValidHeaderFieldValue): no CR, LF or NUL to end the
// field early.
func validValue(s string) bool {
	// eight bytes at a time: a word with no byte below 0x20 and none equal
	// to 0x7f is valid as it is; one that has (a tab, or a control byte) is
	// looked at byte by byte
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+8 <= len(s); i += 8 {
		x := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		del := x ^ 0x7f*ones
		if (x-0x20*ones)&^x&highs == 0 && (del-ones)&^del&highs == 0 {
			continue
		}
		for j := i; j < i+8; j++ {
			if !validHeaderValueByte(s[j]) {
				return false
			}
		}
	}
	for ; i < len(s); i++ {
		if !validHeaderValueByte(s[i]) {
			return false
		}
	}
	return true
}

// validTarget reports whether s can be part of a request line: no control
// byte (net/http refuses those too) and no space, which would end the
// target early.
func validTarget(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}
