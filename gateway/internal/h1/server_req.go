package h1

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync"
)

// The request side of Server: reading a head as net/http's server reads
// it (net/textproto's rules, then readTransfer's, then the server's own
// checks), into one string that every header key and value is a substring
// of, and the request bodies.

// statusError is a request the server answers with code and text, then
// closes (net/http's statusError).
type statusError struct {
	code int
	text string
}

func (e statusError) Error() string { return http.StatusText(e.code) + ": " + e.text }

var (
	errTooLarge    = errors.New("h1: request head too large")
	errMalformed   = errors.New("h1: malformed request")
	errUnsupported = errors.New("h1: unsupported transfer encoding")
)

func badRequest(text string) error { return statusError{http.StatusBadRequest, text} }

// readHead reads one request head, up to and including its empty line,
// and returns it as a string. limit bounds it (431 beyond). A head that
// fits in the reader's buffer is converted in place; a longer one is
// collected in a slice.
func readHead(br *bufio.Reader, limit int) (string, error) {
	scan := 0 // the bytes before scan are whole lines already looked at
	for {
		buf, _ := br.Peek(br.Buffered())
		if end := headEnd(buf, &scan); end >= 0 {
			if end > limit {
				return "", errTooLarge
			}
			s := string(buf[:end])
			_, _ = br.Discard(end)
			return s, nil
		}
		if len(buf) > limit {
			return "", errTooLarge
		}
		if len(buf) == br.Size() {
			return readLongHead(br, limit, scan)
		}
		if _, err := br.Peek(len(buf) + 1); err != nil {
			if len(buf) > 0 && err == io.EOF {
				return "", io.ErrUnexpectedEOF
			}
			return "", err
		}
	}
}

// readLongHead collects a head longer than the reader's buffer.
func readLongHead(br *bufio.Reader, limit, scan int) (string, error) {
	var b []byte
	for {
		buf, _ := br.Peek(br.Buffered())
		old := len(b)
		b = append(b, buf...)
		if end := headEnd(b, &scan); end >= 0 {
			if end > limit {
				return "", errTooLarge
			}
			_, _ = br.Discard(end - old)
			return string(b[:end]), nil
		}
		_, _ = br.Discard(len(buf))
		if len(b) > limit {
			return "", errTooLarge
		}
		if _, err := br.Peek(1); err != nil {
			if err == io.EOF {
				return "", io.ErrUnexpectedEOF
			}
			return "", err
		}
	}
}

// headEnd returns the offset just past b's first empty line, or -1; scan
// is the start of the first line not yet looked at (a line start), moved
// on past every complete line.
func headEnd(b []byte, scan *int) int {
	i := *scan
	for {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			*scan = i
			return -1
		}
		if j == 0 || j == 1 && b[i] == '\r' {
			return i + j + 1
		}
		i += j + 1
	}
}

// cutLine returns s's first line without its LF and optional CR.
func cutLine(s string) (line, rest string) {
	i := strings.IndexByte(s, '\n')
	if i < 0 {
		return s, ""
	}
	line, rest = s[:i], s[i+1:]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	return line, rest
}

// trimWS is textproto's trim: spaces and tabs off both ends.
func trimWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// parsedHead is what parseHead makes of a head.
type parsedHead struct {
	method, uri, proto string
	major, minor       int
	url                *url.URL
	header             http.Header
}

// parseHead parses a complete head as net/http's readRequest does, up to
// (not including) the transfer rules.
func parseHead(s string) (parsedHead, error) {
	var p parsedHead
	line, rest := cutLine(s)
	var ok1, ok2, ok bool
	var r1 string
	p.method, r1, ok1 = strings.Cut(line, " ")
	p.uri, p.proto, ok2 = strings.Cut(r1, " ")
	if !ok1 || !ok2 {
		return p, badRequest("malformed HTTP request")
	}
	if !validMethod(p.method) {
		return p, badRequest("invalid method")
	}
	if p.major, p.minor, ok = parseVersionString(p.proto); !ok {
		return p, badRequest("malformed HTTP version")
	}
	var err error
	if p.url, err = parseRequestURI(p.method, p.uri); err != nil {
		return p, errMalformed
	}
	if p.header, err = parseFields(rest); err != nil {
		return p, err
	}
	return p, nil
}

// parseVersionString is http.ParseHTTPVersion with its fast cases.
func parseVersionString(v string) (int, int, bool) {
	switch v {
	case "HTTP/1.1":
		return 1, 1, true
	case "HTTP/1.0":
		return 1, 0, true
	}
	return http.ParseHTTPVersion(v)
}

// parseRequestURI is net/http's URL parsing of a request target: a
// CONNECT authority as host only, anything else by url.ParseRequestURI;
// a plain path (and query) is built without it.
func parseRequestURI(method, uri string) (*url.URL, error) {
	if method == "CONNECT" && !strings.HasPrefix(uri, "/") {
		u, err := url.ParseRequestURI("http://" + uri)
		if err != nil {
			return nil, err
		}
		u.Scheme = ""
		return u, nil
	}
	if len(uri) > 0 && uri[0] == '/' && (len(uri) == 1 || uri[1] != '/') {
		q := strings.IndexByte(uri, '?')
		path, query := uri, ""
		if q >= 0 {
			path, query = uri[:q], uri[q+1:]
		}
		if plainPath(path) && !hasCTL(query) && (q < 0 || query != "") { // "/p?" is ForceQuery
			return &url.URL{Path: path, RawQuery: query}, nil
		}
	}
	return url.ParseRequestURI(uri)
}

// plainPath: every byte is one url.ParseRequestURI keeps as it is in Path
// with an empty RawPath.
func plainPath(p string) bool {
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-' || c == '_' || c == '.' || c == '~' || c == '/' || c == '$' || c == '&' || c == '+' || c == ',' || c == ':' || c == ';' || c == '=' || c == '@':
		default:
			return false
		}
	}
	return true
}

func hasCTL(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] == 0x7f {
			return true
		}
	}
	return false
}

// parseFields parses the header fields of a head (what follows the
// request line, up to the empty line) as textproto.ReadMIMEHeader and the
// server's field checks do. Keys and values are substrings of s.
func parseFields(s string) (http.Header, error) {
	n := strings.Count(s, "\n")
	if n > 0 {
		n-- // the empty line
	}
	h := make(http.Header, n)
	if n == 0 {
		return h, nil
	}
	strs := make([]string, n)
	if s[0] == ' ' || s[0] == '\t' {
		return nil, errMalformed // malformed MIME header initial line
	}
	for {
		var line string
		line, s = cutLine(s)
		if line == "" {
			return h, nil
		}
		kv := trimWS(line)
		if len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
			if strings.IndexByte(kv, ':') < 0 {
				return nil, errMalformed
			}
			var b strings.Builder
			b.WriteString(kv)
			for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
				line, s = cutLine(s)
				b.WriteByte(' ')
				b.WriteString(trimWS(line))
			}
			kv = b.String()
		}
		k, v, ok := strings.Cut(kv, ":")
		if !ok || k == "" {
			return nil, errMalformed
		}
		key, ok := canonicalKey(k)
		if !ok {
			return nil, errMalformed
		}
		for i := 0; i < len(v); i++ {
			if !validHeaderValueByte(v[i]) {
				return nil, errMalformed
			}
		}
		for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
			v = v[1:]
		}
		if vv, seen := h[key]; seen {
			h[key] = append(vv, v)
		} else if len(strs) > 0 {
			vv, strs = strs[:1:1], strs[1:]
			vv[0] = v
			h[key] = vv
		} else {
			h[key] = []string{v}
		}
	}
}

// canonicalKey returns k in canonical form (k itself when it already is)
// and false when k is not a token (the server refuses the request).
func canonicalKey(k string) (string, bool) {
	canon := true
	upper := true
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !validHeaderFieldByte(c) {
			return "", false
		}
		if upper && 'a' <= c && c <= 'z' || !upper && 'A' <= c && c <= 'Z' {
			canon = false
		}
		upper = c == '-'
	}
	if canon {
		return k, true
	}
	if len(k) <= 64 {
		var b [64]byte
		kb := b[:len(k)]
		copy(kb, k)
		upper := true
		for i, c := range kb {
			if upper && 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			} else if !upper && 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			kb[i] = c
			upper = c == '-'
		}
		if v, ok := commonKeys[string(kb)]; ok {
			return v, true
		}
		return string(kb), true
	}
	return textproto.CanonicalMIMEHeaderKey(k), true
}

var commonKeys = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{"Accept", "Accept-Charset", "Accept-Encoding", "Accept-Language", "Authorization",
		"Cache-Control", "Connection", "Content-Length", "Content-Type", "Cookie", "Expect", "Forwarded", "Host",
		"If-Modified-Since", "If-None-Match", "Origin", "Pragma", "Referer", "Te", "Trailer", "Transfer-Encoding",
		"Upgrade", "User-Agent", "Via", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Request-Id",
		"Traceparent", "Tracestate", "Sec-Websocket-Key", "Sec-Websocket-Version", "Sec-Websocket-Protocol",
		"Sec-Websocket-Extensions", "Keep-Alive", "Range", "Idempotency-Key"} {
		m[k] = k
	}
	return m
}()

// validHeaderFieldByte: a token byte (RFC 9110 tchar).
func validHeaderFieldByte(c byte) bool { return c < 0x80 && isTchar[c] }

// validHeaderValueByte: VCHAR, SP, HTAB or obs-text.
func validHeaderValueByte(c byte) bool { return c >= 0x80 || c >= 0x20 && c != 0x7f || c == '\t' }

var isTchar = func() (t [128]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// validMethod reports whether m is an RFC 9110 token (a method, a field
// name).
func validMethod(m string) bool {
	if m == "" {
		return false
	}
	for i := 0; i < len(m); i++ {
		if !validHeaderFieldByte(m[i]) {
			return false
		}
	}
	return true
}

// validHostHeader is httpguts.ValidHostHeader.
func validHostHeader(h string) bool {
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!$%&()*+,-.:;=[']_~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// hasToken reports whether the comma-separated list v holds token
// (ASCII case-insensitive), as httpguts.HeaderValuesContainsToken.
func hasToken(vs []string, token string) bool {
	for _, v := range vs {
		for v != "" {
			var el string
			el, v, _ = strings.Cut(v, ",")
			if strings.EqualFold(textproto.TrimString(el), token) {
				return true
			}
		}
	}
	return false
}

// transfer applies readTransfer's rules to a parsed head: body length,
// chunked, trailers declared, Close.
type transfer struct {
	length  int64 // -1: chunked
	chunked bool
	close   bool
	trailer http.Header
}

func readTransfer(p *parsedHead) (transfer, error) {
	var t transfer
	h := p.header
	conv := h["Connection"]
	hasClose := hasToken(conv, "close")
	switch {
	case p.major < 1:
		t.close = true
	case p.major == 1 && p.minor == 0:
		t.close = hasClose || !hasToken(conv, "keep-alive")
	default:
		t.close = hasClose
	}
	if raw, ok := h["Transfer-Encoding"]; ok {
		delete(h, "Transfer-Encoding")
		if p.major > 1 || p.major == 1 && p.minor >= 1 {
			if len(raw) != 1 || !strings.EqualFold(raw[0], "chunked") {
				return t, errUnsupported
			}
			t.chunked = true
		}
	}
	if cls := h["Content-Length"]; len(cls) > 0 {
		first := textproto.TrimString(cls[0])
		for _, cl := range cls[1:] {
			if textproto.TrimString(cl) != first {
				return t, errMalformed // several differing Content-Length fields
			}
		}
		if len(cls) > 1 {
			h["Content-Length"] = []string{first}
		}
		if first == "" {
			return t, errMalformed
		}
		n, err := strconv.ParseUint(first, 10, 63)
		if err != nil {
			return t, errMalformed
		}
		t.length = int64(n)
	}
	if t.chunked {
		delete(h, "Content-Length")
		t.length = -1
		if vv, ok := h["Trailer"]; ok {
			delete(h, "Trailer")
			tr := http.Header{}
			for _, v := range vv {
				for el := range strings.SplitSeq(v, ",") {
					if el = textproto.TrimString(el); el == "" {
						continue
					}
					k := http.CanonicalHeaderKey(el)
					switch k {
					case "Transfer-Encoding", "Trailer", "Content-Length":
						return t, errMalformed
					}
					tr[k] = nil
				}
			}
			if len(tr) > 0 {
				t.trailer = tr
			}
		}
	}
	return t, nil
}

// maxPostHandlerReadBytes is how much of a request body the server reads
// and discards to keep a connection the handler left it unread on
// (net/http's bound).
const maxPostHandlerReadBytes = 256 << 10

// body is a request body: Content-Length bytes or a chunked stream with
// its trailer section, read from the connection's buffered reader. Its
// Read and Close are safe for concurrent use (net/http's are).
type body struct {
	mu      sync.Mutex
	c       *conn
	w       *response
	remain  int64     // Content-Length bytes left (not chunked)
	chunked io.Reader // nil: Content-Length
	req     *http.Request
	sawEOF  bool
	closed  bool
	early   bool // closed with more than maxPostHandlerReadBytes left unread
	err     error
}

var errTrailerEOF = errors.New("http: unexpected EOF reading trailer")

func (b *body) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	return b.readLocked(p)
}

func (b *body) readLocked(p []byte) (int, error) {
	if b.sawEOF {
		return 0, io.EOF
	}
	if b.err != nil {
		return 0, b.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if b.w.canWriteContinue.Load() {
		b.w.writeContinue()
	}
	if b.chunked == nil {
		if int64(len(p)) > b.remain {
			p = p[:b.remain]
		}
		n, err := b.c.br.Read(p)
		b.remain -= int64(n)
		if b.remain == 0 {
			b.eof()
			return n, io.EOF
		}
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			b.err = err
		}
		return n, err
	}
	n, err := b.chunked.Read(p)
	if err == io.EOF {
		if terr := b.readTrailer(); terr != nil {
			b.err = terr
			return n, terr
		}
		b.eof()
	} else if err != nil {
		b.err = err
	}
	return n, err
}

func (b *body) eof() {
	b.sawEOF = true
	b.c.watchArm()
}

// readTrailer is net/http's: an empty trailer is a CRLF; anything else
// must show its end within the reader's buffer.
func (b *body) readTrailer() error {
	br := b.c.br
	buf, err := br.Peek(2)
	if bytes.Equal(buf, []byte("\r\n")) {
		_, _ = br.Discard(2)
		return nil
	}
	if len(buf) < 2 {
		return errTrailerEOF
	}
	if err != nil {
		return err
	}
	for n := 4; ; n++ {
		buf, err := br.Peek(n)
		if bytes.HasSuffix(buf, []byte("\r\n\r\n")) {
			break
		}
		if err != nil {
			return errors.New("http: suspiciously long trailer after chunked body")
		}
	}
	hdr, err := textproto.NewReader(br).ReadMIMEHeader()
	if err != nil {
		if err == io.EOF {
			return errTrailerEOF
		}
		return err
	}
	if b.req.Trailer == nil {
		b.req.Trailer = http.Header(hdr)
	} else {
		for k, v := range hdr {
			b.req.Trailer[k] = v
		}
	}
	return nil
}

// unread is the declared body left unread, -1 when unknown (chunked).
func (b *body) unread() int64 {
	if b.chunked != nil {
		return -1
	}
	return b.remain
}

// Close discards what is left, up to maxPostHandlerReadBytes, so that the
// connection can serve the next request (net/http's doEarlyClose).
func (b *body) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	var err error
	switch {
	case b.sawEOF:
	case b.unread() > maxPostHandlerReadBytes:
		b.early = true
	default:
		var n int64
		n, err = io.CopyN(io.Discard, bodyLocked{b}, maxPostHandlerReadBytes)
		if err == io.EOF {
			err = nil
		}
		if n == maxPostHandlerReadBytes {
			b.early = true
		}
	}
	b.closed = true
	return err
}

// abandon closes b without reading it: the connection will not serve
// another request.
func (b *body) abandon() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed && !b.sawEOF {
		b.early = true
	}
	b.closed = true
}

// bodyLocked reads b with its lock held.
type bodyLocked struct{ b *body }

func (bl bodyLocked) Read(p []byte) (int, error) {
	if bl.b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	return bl.b.readLocked(p)
}

// clean reports whether the body ended where its framing says.
func (b *body) clean() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sawEOF && !b.early
}

func newChunkedReader(br *bufio.Reader) io.Reader { return httputil.NewChunkedReader(br) }
