package h1

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The response side of Server: net/http's chunkWriter rules (when a
// response gets a Content-Length, when it is chunked, when the connection
// closes after it) on one buffered writer per connection. The handler's
// header is written as it stands when the header goes out, unsorted; it is
// copied only if the handler touches it between WriteHeader and then
// (net/http copies it on every WriteHeader after Header was called).

// preSize is how much of a body is held before the header is written: a
// handler that writes less and returns gets a Content-Length (net/http's
// bufferBeforeChunkingSize).
const preSize = 2048

type response struct {
	c      *conn
	req    *http.Request
	body   *body // nil: http.NoBody
	cancel context.CancelFunc
	header http.Header // the handler's
	snap   http.Header // the header as WriteHeader saw it, if the handler touched it before it went out

	status          int
	wroteHeader     bool // logically (WriteHeader called)
	sent            bool // the header is on the connection's writer
	chunking        bool
	handlerDone     atomic.Bool
	contentLength   int64 // -1: none
	written         int64
	closeAfterReply bool
	bodyTooBig      bool // the request body was left unread, too long to drain
	wants10KeepAlive,
	wantsClose,
	fullDuplex,
	expectContinue bool
	canWriteContinue atomic.Bool
	continueMu       sync.Mutex
	trailers         []string // declared by the Trailer header
	pre              []byte   // the body's first bytes, before the header is sent
	werr             error
}

func (w *response) init(c *conn, req *http.Request, cancel context.CancelFunc) {
	w.c, w.req, w.cancel = c, req, cancel
	w.header = make(http.Header)
	w.contentLength = -1
	conn := req.Header["Connection"]
	if len(conn) > 1 {
		conn = conn[:1]
	}
	w.wants10KeepAlive = req.ProtoMajor == 1 && req.ProtoMinor == 0 && hasToken(conn, "keep-alive")
	w.wantsClose = hasToken(conn, "close")
	if req.Method == "PRI" && req.Proto == "HTTP/2.0" {
		w.closeAfterReply = true
	}
	w.pre = c.pre[:0]
}

var errAfterHandler = errors.New("h1: write after the handler returned")

func (w *response) Header() http.Header {
	if w.snap == nil && w.wroteHeader && !w.sent {
		w.snap = w.header.Clone()
	}
	return w.header
}

func bodyAllowedForStatus(status int) bool {
	switch {
	case status >= 100 && status <= 199:
		return false
	case status == 204, status == 304:
		return false
	}
	return true
}

// relevantCaller is the first caller outside this package, for logs.
func relevantCaller() (string, string, int) {
	pc := make([]uintptr, 16)
	n := runtime.Callers(2, pc)
	frames := runtime.CallersFrames(pc[:n])
	for {
		f, more := frames.Next()
		if !strings.Contains(f.Function, "gateway/internal/h1.") {
			return f.Function, path.Base(f.File), f.Line
		}
		if !more {
			return f.Function, path.Base(f.File), f.Line
		}
	}
}

func (w *response) WriteHeader(code int) {
	if w.c.hijacked {
		fn, file, line := relevantCaller()
		w.c.srv.logf("http: response.WriteHeader on hijacked connection from %s (%s:%d)", fn, file, line)
		return
	}
	if w.wroteHeader {
		fn, file, line := relevantCaller()
		w.c.srv.logf("http: superfluous response.WriteHeader call from %s (%s:%d)", fn, file, line)
		return
	}
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if code < 101 || code > 199 {
		w.disableContinue()
	}
	if code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols {
		// informational: sent at once, the header map stays (RFC 8297)
		bw := w.c.bw
		writeStatusLine(bw, w.req.ProtoAtLeast(1, 1), code)
		writeFields(bw, w.header, exclNoBody, nil)
		_, _ = bw.WriteString("\r\n")
		if err := bw.Flush(); err != nil {
			w.werr = err
		}
		return
	}
	w.wroteHeader = true
	w.status = code
	if cl := first(w.header["Content-Length"]); cl != "" {
		v, err := strconv.ParseInt(cl, 10, 64)
		if err == nil && v >= 0 {
			w.contentLength = v
		} else {
			w.c.srv.logf("http: invalid Content-Length of %q", cl)
			w.header.Del("Content-Length")
		}
	}
}

func first(vv []string) string {
	if len(vv) == 0 {
		return ""
	}
	return vv[0]
}

func (w *response) Write(b []byte) (int, error) { return w.write(len(b), b, "") }

func (w *response) WriteString(s string) (int, error) { return w.write(len(s), nil, s) }

func (w *response) write(n int, b []byte, s string) (int, error) {
	if w.c.hijacked {
		if n > 0 {
			fn, file, line := relevantCaller()
			w.c.srv.logf("http: response.Write on hijacked connection from %s (%s:%d)", fn, file, line)
		}
		return 0, http.ErrHijacked
	}
	if w.handlerDone.Load() {
		return 0, errAfterHandler
	}
	if w.canWriteContinue.Load() {
		w.disableContinue()
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if n == 0 {
		return 0, nil
	}
	if !bodyAllowedForStatus(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	w.written += int64(n)
	if w.contentLength != -1 && w.written > w.contentLength {
		return 0, http.ErrContentLength
	}
	if !w.sent {
		if len(w.pre)+n <= preSize {
			if b != nil {
				w.pre = append(w.pre, b...)
			} else {
				w.pre = append(w.pre, s...)
			}
			return n, nil
		}
		p := w.pre
		if len(p) == 0 {
			p = b
			if p == nil {
				p = []byte(s[:min(len(s), 512)])
			}
		}
		w.writeHeader(p)
		pre := w.pre
		w.pre = w.pre[:0]
		return w.writeBody(pre, b, s, n)
	}
	return w.writeBody(nil, b, s, n)
}

// writeBody writes pre then b or s (n bytes of them) as body bytes: one
// chunk when chunking, nothing for HEAD.
func (w *response) writeBody(pre, b []byte, s string, n int) (int, error) {
	if w.req.Method == "HEAD" {
		return n, nil
	}
	bw := w.c.bw
	if w.chunking {
		var hb [20]byte
		_, _ = bw.Write(strconv.AppendInt(hb[:0], int64(len(pre)+n), 16))
		_, _ = bw.WriteString("\r\n")
	}
	if len(pre) > 0 {
		_, _ = bw.Write(pre)
	}
	var err error
	if b != nil {
		_, err = bw.Write(b)
	} else {
		_, err = bw.WriteString(s)
	}
	if w.chunking && err == nil {
		_, err = bw.WriteString("\r\n")
	}
	if err != nil {
		w.werr = err
		return 0, err
	}
	return n, nil
}

// sendHeader writes the header and the held bytes, if not yet done.
func (w *response) sendHeader() {
	if w.sent {
		return
	}
	w.writeHeader(w.pre)
	if len(w.pre) > 0 {
		pre := w.pre
		w.pre = w.pre[:0]
		_, _ = w.writeBody(nil, pre, "", len(pre))
	}
}

func (w *response) Flush() { _ = w.FlushError() }

func (w *response) FlushError() error {
	if w.c.hijacked {
		return http.ErrHijacked
	}
	if w.handlerDone.Load() {
		return errAfterHandler
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	w.sendHeader()
	if err := w.c.bw.Flush(); err != nil {
		w.werr = err
		return err
	}
	return nil
}

// finish ends the response after the handler returned: the header (with a
// Content-Length when the body was held whole), the last chunk and the
// trailers, a flush; then what is left of the request body is read.
func (w *response) finish() {
	w.handlerDone.Store(true)
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	w.sendHeader()
	bw := w.c.bw
	if w.chunking {
		_, _ = bw.WriteString("0\r\n")
		for k, vv := range w.header {
			if kk, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
				writeField(bw, kk, vv)
			}
		}
		for _, k := range w.trailers {
			writeField(bw, k, w.header[k])
		}
		_, _ = bw.WriteString("\r\n")
	}
	if err := bw.Flush(); err != nil {
		w.werr = err
	}
	switch {
	case w.body == nil:
	case w.closeAfterReply:
		w.body.abandon() // the connection closes: nothing to read it for
	default:
		_ = w.body.Close()
	}
}

// reuse reports whether the connection can serve another request.
func (w *response) reuse() bool {
	switch {
	case w.closeAfterReply, w.werr != nil:
		return false
	case w.req.Method != "HEAD" && w.contentLength != -1 && bodyAllowedForStatus(w.status) && w.contentLength != w.written:
		return false // short: the client must not take what follows as the next response
	case w.body != nil && !w.body.clean():
		return false
	}
	return true
}

// unfinishedBody: the request body was not read to its end (left unread,
// refused, or its read failed), so the client may still be sending it.
func (w *response) unfinishedBody() bool {
	if w.bodyTooBig {
		return true
	}
	if w.body != nil {
		w.body.mu.Lock()
		defer w.body.mu.Unlock()
		return !w.body.sawEOF
	}
	return false
}

// closeDelimited: the header went out with neither a length nor chunking,
// so only the connection's close ends the answer.
func (w *response) closeDelimited() bool {
	return w.sent && !w.chunking && w.contentLength == -1 && w.req.Method != "HEAD" && bodyAllowedForStatus(w.status)
}

// header fields writeFields leaves out
type excl uint8

const (
	exclCL excl = 1 << iota
	exclTE
	exclConn
	exclCT
	exclNoBody = exclCL | exclTE
)

var crlf = "\r\n"

// writeHeader decides the framing and writes the status line and header
// fields; p is the body's first bytes (sniffed for a Content-Type, and
// the whole body when the handler is done).
func (w *response) writeHeader(p []byte) {
	w.sent = true
	c := w.c
	keepAlives := c.srv.keepAlives()
	isHEAD := w.req.Method == "HEAD"
	header := w.snap
	if header == nil {
		header = w.header
	}
	var ex excl
	trailers := false
	for k := range header {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			trailers = true
			break
		}
	}
	for _, v := range header["Trailer"] {
		trailers = true
		for el := range strings.SplitSeq(v, ",") {
			if el = trimASCII(el); el != "" {
				w.declareTrailer(el)
			}
		}
	}
	te := first(header["Transfer-Encoding"])
	hasTE := te != ""
	var setCL, setConn, setTE, setCT string
	if _, ok := header["Content-Length"]; !ok && w.handlerDone.Load() && !trailers && !hasTE && bodyAllowedForStatus(w.status) && (!isHEAD || len(p) > 0) {
		w.contentLength = int64(len(p))
		setCL = strconv.Itoa(len(p))
	}
	if w.wants10KeepAlive && keepAlives {
		if first(header["Content-Length"]) != "" && first(header["Connection"]) == "keep-alive" {
			w.closeAfterReply = false
		}
	}
	hasCL := w.contentLength != -1
	if w.wants10KeepAlive && (isHEAD || hasCL || !bodyAllowedForStatus(w.status)) {
		if _, set := header["Connection"]; !set {
			setConn = "keep-alive"
		}
	} else if !w.req.ProtoAtLeast(1, 1) || w.wantsClose {
		w.closeAfterReply = true
	}
	if first(header["Connection"]) == "close" || !keepAlives {
		w.closeAfterReply = true
	}
	if b := w.body; b != nil {
		if w.expectContinue {
			b.mu.Lock()
			if !b.sawEOF {
				w.closeAfterReply = true // the body was never asked for
			}
			b.mu.Unlock()
		} else if w.req.ContentLength != 0 && !w.closeAfterReply && !w.fullDuplex {
			// read what is left of the body before answering: some clients
			// send their whole request before they read (net/http's rule)
			var discard, tooBig bool
			b.mu.Lock()
			switch {
			case b.closed:
				if !b.sawEOF {
					w.closeAfterReply = true
				}
			case b.unread() >= maxPostHandlerReadBytes:
				tooBig = true
			default:
				discard = true
			}
			b.mu.Unlock()
			if discard {
				_, err := io.CopyN(io.Discard, b, maxPostHandlerReadBytes+1)
				switch err {
				case nil:
					tooBig = true
				case http.ErrBodyReadAfterClose:
				case io.EOF:
					if err := b.Close(); err != nil {
						w.closeAfterReply = true
					}
				default:
					w.closeAfterReply = true
				}
			}
			if tooBig {
				w.bodyTooBig, w.closeAfterReply = true, true
				ex |= exclConn
				setConn = "close"
			}
		}
	}
	code := w.status
	if bodyAllowedForStatus(code) {
		_, haveType := header["Content-Type"]
		if first(header["Content-Encoding"]) == "" && !haveType && !hasTE && len(p) > 0 {
			setCT = http.DetectContentType(p)
		}
	} else if code == http.StatusNotModified {
		ex |= exclCT | exclCL | exclTE
	} else {
		ex |= exclCL | exclTE
	}
	if hasCL && hasTE && te != "identity" {
		c.srv.logf("http: WriteHeader called with both Transfer-Encoding of %q and a Content-Length of %d", te, w.contentLength)
		ex |= exclCL
		hasCL = false
	}
	ex |= exclTE // the handler's own Transfer-Encoding is never sent; chunked is written below
	switch {
	case isHEAD || !bodyAllowedForStatus(code):
	case hasCL:
	case w.req.ProtoAtLeast(1, 1):
		if hasTE && te == "identity" {
			w.closeAfterReply = true
		} else {
			w.chunking = true
			setTE = "chunked"
		}
	default:
		w.closeAfterReply = true // HTTP/1.0 without a length: the close ends the body
	}
	if w.chunking {
		ex |= exclCL
	}
	if w.closeAfterReply && (!keepAlives || !hasToken(header["Connection"], "close")) && !isProtocolSwitch(code, header) {
		ex |= exclConn
		setConn = ""
		if w.req.ProtoAtLeast(1, 1) {
			setConn = "close"
		}
	}
	bw := c.bw
	writeStatusLine(bw, w.req.ProtoAtLeast(1, 1), code)
	var declared []string
	if w.snap == nil {
		declared = w.trailers
	}
	writeFields(bw, header, ex, declared)
	if _, ok := header["Date"]; !ok {
		_, _ = bw.WriteString("Date: ")
		_, _ = bw.Write(httpDate())
		_, _ = bw.WriteString(crlf)
	}
	for _, f := range [...]struct{ k, v string }{{"Content-Length", setCL}, {"Content-Type", setCT}, {"Connection", setConn}, {"Transfer-Encoding", setTE}} {
		if f.v != "" {
			_, _ = bw.WriteString(f.k)
			_, _ = bw.WriteString(": ")
			_, _ = bw.WriteString(f.v)
			_, _ = bw.WriteString(crlf)
		}
	}
	_, _ = bw.WriteString(crlf)
}

func isProtocolSwitch(code int, h http.Header) bool {
	return code == http.StatusSwitchingProtocols && first(h["Upgrade"]) != "" && hasToken(h["Connection"], "upgrade")
}

// declareTrailer notes a trailer the Trailer header announced (net/http's
// rules: canonical, not one a trailer may not carry).
func (w *response) declareTrailer(k string) {
	k = http.CanonicalHeaderKey(k)
	if strings.HasPrefix(k, "If-") || badTrailer[k] {
		return
	}
	w.trailers = append(w.trailers, k)
}

var badTrailer = map[string]bool{
	"Authorization": true, "Cache-Control": true, "Connection": true, "Content-Encoding": true,
	"Content-Length": true, "Content-Range": true, "Content-Type": true, "Expect": true, "Host": true,
	"Keep-Alive": true, "Max-Forwards": true, "Pragma": true, "Proxy-Authenticate": true,
	"Proxy-Authorization": true, "Proxy-Connection": true, "Range": true, "Realm": true, "Te": true,
	"Trailer": true, "Transfer-Encoding": true, "Www-Authenticate": true,
}

func trimASCII(s string) string {
	for len(s) > 0 && isASCIISpace(s[0]) {
		s = s[1:]
	}
	for len(s) > 0 && isASCIISpace(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}

func isASCIISpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// writeFields writes h's fields but those ex leaves out, the
// http.TrailerPrefix ones, the declared trailers, and invalid names.
func writeFields(bw *bufio.Writer, h http.Header, ex excl, declared []string) {
outer:
	for k, vv := range h {
		switch k {
		case "Content-Length":
			if ex&exclCL != 0 {
				continue
			}
		case "Transfer-Encoding":
			if ex&exclTE != 0 {
				continue
			}
		case "Connection":
			if ex&exclConn != 0 {
				continue
			}
		case "Content-Type":
			if ex&exclCT != 0 {
				continue
			}
		}
		if strings.HasPrefix(k, http.TrailerPrefix) || !validMethod(k) {
			continue
		}
		for _, d := range declared {
			if d == k {
				continue outer
			}
		}
		writeField(bw, k, vv)
	}
}

// writeField writes one field per value, each trimmed and with CR and LF
// turned into spaces (net/http's Header.Write).
func writeField(bw *bufio.Writer, k string, vv []string) {
	if !validMethod(k) {
		return
	}
	for _, v := range vv {
		_, _ = bw.WriteString(k)
		_, _ = bw.WriteString(": ")
		v = trimASCII(v)
		if strings.ContainsAny(v, "\r\n") {
			for i := 0; i < len(v); i++ {
				c := v[i]
				if c == '\r' || c == '\n' {
					c = ' '
				}
				_ = bw.WriteByte(c)
			}
		} else {
			_, _ = bw.WriteString(v)
		}
		_, _ = bw.WriteString(crlf)
	}
}

var statusLines = func() (t [2][600]string) {
	for code := 100; code < 600; code++ {
		if text := http.StatusText(code); text != "" {
			t[0][code] = "HTTP/1.0 " + strconv.Itoa(code) + " " + text + "\r\n"
			t[1][code] = "HTTP/1.1 " + strconv.Itoa(code) + " " + text + "\r\n"
		}
	}
	return t
}()

func writeStatusLine(bw *bufio.Writer, is11 bool, code int) {
	v := 0
	if is11 {
		v = 1
	}
	if code < 600 && statusLines[v][code] != "" {
		_, _ = bw.WriteString(statusLines[v][code])
		return
	}
	proto := "HTTP/1.0 "
	if is11 {
		proto = "HTTP/1.1 "
	}
	_, _ = fmt.Fprintf(bw, "%s%03d status code %d\r\n", proto, code, code)
}

// httpDate is the Date header's value, formatted once a second.
func httpDate() []byte {
	now := time.Now()
	sec := now.Unix()
	if d := dateCache.Load(); d != nil && d.sec == sec {
		return d.b
	}
	d := &cachedDate{sec: sec, b: now.UTC().AppendFormat(make([]byte, 0, len(http.TimeFormat)), http.TimeFormat)}
	dateCache.Store(d)
	return d.b
}

type cachedDate struct {
	sec int64
	b   []byte
}

var dateCache atomic.Pointer[cachedDate]

func (w *response) disableContinue() {
	w.continueMu.Lock()
	w.canWriteContinue.Store(false)
	w.continueMu.Unlock()
}

// writeContinue sends 100 Continue the first time the handler reads a
// body whose client asked for it, unless the response began.
func (w *response) writeContinue() {
	w.continueMu.Lock()
	defer w.continueMu.Unlock()
	if w.canWriteContinue.Load() {
		bw := w.c.bw
		_, _ = bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
		_ = bw.Flush()
		w.canWriteContinue.Store(false)
	}
}

// Hijack hands the connection to the handler (http.Hijacker): what was
// written is flushed, a pending watch read is stopped, and the bytes the
// server has buffered come with the returned reader.
func (w *response) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if w.handlerDone.Load() {
		panic("net/http: Hijack called after ServeHTTP finished")
	}
	c := w.c
	if c.hijacked {
		return nil, nil, http.ErrHijacked
	}
	w.disableContinue()
	if w.wroteHeader {
		w.sendHeader()
	}
	c.watchStop()
	if err := c.bw.Flush(); err != nil {
		return nil, nil, err
	}
	c.hijacked = true
	rwc := c.rwc
	_ = rwc.SetDeadline(time.Time{})
	ConnState(rwc, http.StateHijacked)
	br := c.br
	c.br = nil
	c.bw.Reset(nil)
	writerPool.Put(c.bw)
	c.bw = nil
	c.srv.untrack(c)
	return rwc, bufio.NewReadWriter(br, bufio.NewWriter(rwc)), nil
}

// SetReadDeadline, SetWriteDeadline and EnableFullDuplex are what
// http.ResponseController calls.
func (w *response) SetReadDeadline(t time.Time) error { return w.c.rwc.SetReadDeadline(t) }
func (w *response) SetWriteDeadline(t time.Time) error {
	w.c.wdTouched.Store(true)
	return w.c.rwc.SetWriteDeadline(t)
}

// EnableFullDuplex lets the handler read the request body while it
// writes the response: the rest of the body is then not read before the
// header goes out.
func (w *response) EnableFullDuplex() error {
	w.fullDuplex = true
	return nil
}
