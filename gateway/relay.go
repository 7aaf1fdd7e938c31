package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/veerhq/veer/gateway/internal/h1"
	"github.com/veerhq/veer/outcome"
)

// The relay: the last step of serveHTTP. It does for the gateway what
// net/http/httputil.ReverseProxy did (the gateway relayed through one until
// issue 32), with the request built by one shallow copy instead of a clone of
// everything and no closure, trace or timer per request:
//
//   - the outgoing request is a copy of the incoming one with its own URL,
//     sharing the incoming header map: the client's fields it does not
//     send are deleted from that map (after the relay, the handler's
//     request no longer has them), and the fields this hop sets are kept
//     beside it (outHeader); the hop-by-hop headers (RFC 9110 §7.6.1:
//     Connection and every header it names, Proxy-Connection, Keep-Alive,
//     Proxy-Authenticate, Proxy-Authorization, Te, Trailer,
//     Transfer-Encoding, Upgrade) are not sent; "Te: trailers" is kept
//     when the client sent it; an upgrade keeps "Connection: Upgrade" and
//     its Upgrade (h2c excepted: it ends here); the caller's
//     X-Forwarded-For (trusted callers only) gains this hop, X-Forwarded-Host
//     and -Proto are this hop's, Forwarded and Via are appended to, the
//     trace context is propagated (trace.go), an unparsable query is
//     re-encoded, and the Host is rewritten when the route says so;
//   - the answer's hop-by-hop headers are removed the same way; a 1xx that
//     http.Transport reports is forwarded (interim, below; the gateway's
//     own HTTP/1.1 client skips them, as before); a 101 hands both
//     connections to two copiers (relayUpgrade); a body of unknown length
//     or an event stream is flushed after every write; trailers, announced
//     or not (http.TrailerPrefix), follow the body;
//   - an error before the answer's head is mapped as every refusal is
//     (relayError); an error while the body is copied, after the head was
//     written, aborts the handler with http.ErrAbortHandler under an
//     http.Server, so that the client sees a broken answer (a reset
//     connection, an HTTP/2 RST_STREAM), never a short one that looks
//     whole. Outside an http.Server (a handler called directly, HTTP/3)
//     the relay returns instead, as ReverseProxy did.

// relayCtx is the outgoing request's context: the incoming one, which also
// answers the request's dispatch state (stateFrom). It lives in the
// request's exchange: no allocation of its own.
type relayCtx struct {
	context.Context
	st *reqState
}

func (c *relayCtx) Value(key any) any {
	if _, ok := key.(stateKey); ok {
		return c.st
	}
	return c.Context.Value(key)
}

// relay sends in upstream through the dispatcher and writes the answer to w.
func (g *Gateway) relay(w *recorder, in *http.Request, x *exchange) {
	st := &x.st
	x.ctx = relayCtx{Context: in.Context(), st: st}
	out := in.WithContext(&x.ctx) // the one copy of the request
	x.url = *in.URL
	out.URL = &x.url
	out.Close = false
	out.URL.RawQuery = cleanQuery(out.URL.RawQuery)
	switch {
	case st.body != nil:
		out.Body = nil // target sets the body of each attempt
		out.ContentLength = st.bodyLength()
	case in.Body == http.NoBody:
		// none, or an empty one buffered (whose trailers, with no body to
		// carry them, are not sent)
		out.Body = nil
		out.ContentLength = 0
	case in.ContentLength == 0:
		out.Body = nil
	case in.Body != nil:
		b := &streamBody{rc: in.Body}
		defer b.Close()
		out.Body = b
	}
	upType, err := g.outHeader(out, in, x)
	if err != nil {
		g.relayError(w, out, err)
		return
	}
	x.fwd.w = w
	st.fwd = &x.fwd
	resp, err := g.disp.RoundTrip(out)
	x.fwd.end()
	if err != nil {
		g.relayError(w, out, err)
		return
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		g.relayUpgrade(w, out, resp, upType)
		return
	}
	g.relayResponse(w, out, resp)
}

// outHeader prepares out's header from in's (see the list above) and
// returns the protocol out asks to switch to ("" when none). out shares
// in's header map: the client's fields that are not sent are deleted from
// it in place, and the fields this hop sets are not added to it but kept
// in the exchange (st.extra): the own HTTP/1.1 client writes them after
// the map, every other way of sending merges both into a map of its own
// (withExtra, at the attempt). No header map per request.
func (g *Gateway) outHeader(out, in *http.Request, x *exchange) (string, error) {
	st := &x.st
	ih := in.Header
	if ih == nil {
		ih = http.Header{}
		in.Header = ih
	}
	conn := ih["Connection"]
	named := func(k string) bool { return len(conn) > 0 && headerHasToken(conn, k) }
	upType := ""
	if headerHasToken(conn, "upgrade") {
		upType = headerValue(ih, "Upgrade")
		if !isPrint(upType) {
			return "", fmt.Errorf("client tried to switch to invalid protocol %q", upType)
		}
	}
	if upgradesToH2C(upType) {
		// h2c upgrades end here: relayed, a backend that upgrades would take
		// the rest of the connection past routing and every guard
		upType = ""
	}
	// what the fields this hop sets are built from, read before the
	// client's fields go
	te := headerHasToken(ih["Te"], "trailers")
	prevVia := ih["Via"]
	if named("Via") {
		prevVia = nil
	}
	_, ua := ih["User-Agent"]
	ua = ua && !named("User-Agent")
	// the values this hop builds, made one string: X-Forwarded-For
	// (httputil's SetXForwarded, after the caller's chain when the caller
	// is trusted: an untrusted caller's chain is its own claim), Forwarded,
	// traceparent
	var sb [256]byte
	b := sb[:0]
	clientIP, _, err := net.SplitHostPort(in.RemoteAddr)
	xff := err == nil
	if xff {
		if prior := ih["X-Forwarded-For"]; st.trusted && len(prior) > 0 {
			for _, p := range prior {
				b = append(append(b, p...), ", "...)
			}
		}
		b = append(b, clientIP...)
	} else {
		clientIP = in.RemoteAddr
	}
	xffEnd := len(b)
	b = appendForwarded(b, in, st.trusted, clientIP)
	fwdEnd := len(b)
	rnd := g.rng()
	var valid bool // the caller's traceparent
	b, st.hop, valid = appendTraceparent(b, in, rnd, g.opts.SampleNewTraces)
	g.rngs.Put(rnd)
	v := string(b) // the one allocation for the three
	st.hop.setIDs(v[fwdEnd:])

	// the client's fields not sent: hop-by-hop, those Connection names,
	// those this hop sets afresh or appends to
	for k := range ih {
		if hopHeader(k) || forwardingHeader(k) || k == "Via" || k == "Traceparent" || named(k) {
			delete(ih, k)
		}
	}
	if !valid {
		delete(ih, "Tracestate") // it belongs to the invalid traceparent
	}
	// the fields this hop sets; each value slice is capped so that an Add
	// elsewhere copies rather than writes into its neighbour
	vals := x.vals[:0]
	extra := x.extra[:0]
	set := func(k string, vv []string) { extra = append(extra, h1.Field{Key: k, Values: vv}) }
	one := func(k, v string) {
		vals = append(vals, v)
		set(k, vals[len(vals)-1:len(vals):len(vals)])
	}
	if te {
		set("Te", teTrailers)
	}
	if upType != "" {
		set("Connection", connUpgrade)
		one("Upgrade", upType)
	}
	if xff {
		one("X-Forwarded-For", v[:xffEnd])
	}
	one("X-Forwarded-Host", in.Host)
	if in.TLS == nil {
		set("X-Forwarded-Proto", protoHTTP)
	} else {
		set("X-Forwarded-Proto", protoHTTPS)
	}
	one("Forwarded", v[xffEnd:fwdEnd])
	if len(prevVia) > 0 {
		set("Via", append(prevVia[:len(prevVia):len(prevVia)], via(in)))
	} else {
		one("Via", via(in))
	}
	if !ua {
		// no User-Agent of the gateway's own (net/http would send Go's)
		set("User-Agent", emptyValue)
	}
	one("Traceparent", v[fwdEnd:])
	st.extra, st.upgrade = extra, upType != ""
	out.Header = ih
	if hr := st.route.cfg.HostRewrite; hr != "" {
		out.Host = hr
	}
	return upType, nil
}

// withExtra returns req with its extra fields in its header: req itself
// when there are none, else a copy with a header map of its own (for the
// ways of sending that take a header map only: http.Transport, an
// upgrade).
func withExtra(req *http.Request, extra []h1.Field) *http.Request {
	if len(extra) == 0 {
		return req
	}
	h := make(http.Header, len(req.Header)+len(extra))
	for k, vv := range req.Header {
		h[k] = vv
	}
	for _, f := range extra {
		h[f.Key] = f.Values
	}
	r := new(http.Request)
	*r = *req
	r.Header = h
	return r
}

// Values shared by every outgoing request (never written in place: a
// header's value slices are only ever replaced or appended to, which copies
// a full slice).
var (
	teTrailers  = []string{"trailers"}
	connUpgrade = []string{"Upgrade"}
	protoHTTP   = []string{"http"}
	protoHTTPS  = []string{"https"}
	emptyValue  = []string{""}
)

// headerValue is h.Get(k) for a canonical k, without Get's
// canonicalization of k on every call.
func headerValue(h http.Header, k string) string {
	if v := h[k]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// hopHeader reports whether the canonical key k is a hop-by-hop header
// that every hop removes (RFC 9110 §7.6.1, and the older ones httputil
// removes too).
func hopHeader(k string) bool {
	switch k {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
		"Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return false
}

// forwardingHeader reports whether k is one of the headers this hop sets
// afresh.
func forwardingHeader(k string) bool {
	switch k {
	case "Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto":
		return true
	}
	return false
}

// headerHasToken reports whether one of the comma-separated lists in vv
// names token (ASCII case-insensitive; httpguts.HeaderValuesContainsToken).
func headerHasToken(vv []string, token string) bool {
	for _, v := range vv {
		for len(v) > 0 {
			var t string
			t, v, _ = strings.Cut(v, ",")
			if strings.EqualFold(textproto.TrimString(t), token) {
				return true
			}
		}
	}
	return false
}

// isPrint reports whether s is printable ASCII.
func isPrint(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// cleanQuery re-encodes a query net/url cannot parse whole (a ';', a bad
// escape, more than 10000 parameters), dropping what it cannot parse, as
// httputil does before a Rewrite: the backend then sees the parameters
// the gateway would see.
func cleanQuery(s string) string {
	reencode := func(s string) string {
		v, _ := url.ParseQuery(s)
		return v.Encode()
	}
	if strings.Count(s, "&")+1 > 10000 {
		return reencode(s)
	}
	for i := 0; i < len(s); {
		switch s[i] {
		case ';':
			return reencode(s)
		case '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return reencode(s)
			}
			i += 3
		default:
			i++
		}
	}
	return s
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// streamBody is a streamed request body as the attempts see it: its Close
// (http.Transport closes a request body when it fails) leaves the client's
// body open, and a Read once the relay returned fails rather than reading
// the body of a request that is over (httputil's noopCloseReader).
type streamBody struct {
	rc     io.ReadCloser
	closed atomic.Bool
}

var errBodyAfterRelay = errors.New("gateway: read of a request body after its relay returned")

func (b *streamBody) Read(p []byte) (int, error) {
	if b.closed.Load() {
		return 0, errBodyAfterRelay
	}
	return b.rc.Read(p)
}

func (b *streamBody) Close() error { b.closed.Store(true); return nil }

// relayError answers a request no attempt produced an answer for: the
// outcome of the dispatch, as every refusal is written (outcome.WriteHTTP);
// a streamed body that ran past limits.max_request_body is a 413.
func (g *Gateway) relayError(w http.ResponseWriter, out *http.Request, err error) {
	if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
		g.refuseBody(w, g.snap.Load())
		return
	}
	o := outcome.Outcome{Kind: outcome.NetworkOther, Err: err}
	var de *dispatchError
	if errors.As(err, &de) {
		o = de.o
	} else if out.Context().Err() != nil {
		o = outcome.Of(outcome.ClientCanceled)
	}
	o = wireOutcome(o)
	outcome.WriteHTTP(w, o, "upstream "+o.Kind.String())
}

// relayResponse writes resp, a final answer, to w.
func (g *Gateway) relayResponse(w *recorder, out *http.Request, resp *http.Response) {
	dst := w.Header()
	conn := resp.Header["Connection"]
	for k, vv := range resp.Header {
		if hopHeader(k) || len(conn) > 0 && headerHasToken(conn, k) {
			continue
		}
		if prev, ok := dst[k]; ok {
			dst[k] = append(prev, vv...)
		} else {
			dst[k] = vv
		}
	}
	announced := len(resp.Trailer)
	if announced > 0 {
		keys := make([]string, 0, announced)
		for k := range resp.Trailer {
			keys = append(keys, k)
		}
		dst.Add("Trailer", strings.Join(keys, ", "))
	}
	w.WriteHeader(resp.StatusCode)
	flush := resp.ContentLength == -1 || isEventStream(headerValue(resp.Header, "Content-Type"))
	if flush {
		w.Flush() // the head now, not with the first piece of a stream that may be slow to come
	}
	if err := g.copyBody(w, resp.Body, flush); err != nil {
		_ = resp.Body.Close()
		if out.Context().Value(http.ServerContextKey) == nil {
			return // no http.Server to abort the answer: it ends here
		}
		panic(http.ErrAbortHandler)
	}
	_ = resp.Body.Close() // now: it fills resp.Trailer
	if len(resp.Trailer) == 0 {
		return
	}
	// a trailer forces a chunked answer: net/http would otherwise frame a
	// short body with a Content-Length and no room for it
	w.Flush()
	if len(resp.Trailer) == announced {
		for k, vv := range resp.Trailer {
			for _, v := range vv {
				dst.Add(k, v)
			}
		}
		return
	}
	for k, vv := range resp.Trailer {
		k = http.TrailerPrefix + k
		for _, v := range vv {
			dst.Add(k, v)
		}
	}
}

// isEventStream reports whether a Content-Type is text/event-stream
// (https://html.spec.whatwg.org/multipage/server-sent-events.html), whose
// events are flushed as they come.
func isEventStream(ct string) bool {
	base, _, _ := strings.Cut(ct, ";")
	return strings.EqualFold(strings.TrimSpace(base), "text/event-stream")
}

// copyBody copies a response body to w with a pooled buffer, flushing
// after every write when flush. It returns the first write error or read
// error other than the end of the body.
func (g *Gateway) copyBody(w *recorder, body io.Reader, flush bool) error {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	for {
		nr, rerr := body.Read(buf)
		if nr > 0 {
			nw, werr := w.Write(buf[:nr])
			if werr != nil {
				return werr
			}
			if nw != nr {
				return io.ErrShortWrite
			}
			if flush {
				w.Flush()
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			if !errors.Is(rerr, context.Canceled) {
				g.log.Debug("gateway: upstream body read failed", "err", rerr)
			}
			return rerr
		}
	}
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// relayUpgrade relays a 101 Switching Protocols (WebSocket): the client's
// connection is hijacked, the 101 written to it, and two copiers move the
// bytes both ways until one side ends (httputil's handleUpgradeResponse).
func (g *Gateway) relayUpgrade(w *recorder, out *http.Request, resp *http.Response, reqUp string) {
	resUp := ""
	if headerHasToken(resp.Header["Connection"], "upgrade") {
		resUp = resp.Header.Get("Upgrade")
	}
	var refuse error
	switch {
	case !isPrint(resUp):
		refuse = fmt.Errorf("backend tried to switch to invalid protocol %q", resUp)
	case !strings.EqualFold(reqUp, resUp):
		refuse = fmt.Errorf("backend tried to switch protocol %q when %q was requested", resUp, reqUp)
	}
	backConn, ok := resp.Body.(io.ReadWriteCloser)
	if !ok && refuse == nil {
		refuse = errors.New("internal error: 101 switching protocols response with non-writable body")
	}
	if refuse != nil {
		_ = resp.Body.Close() // the backend's connection (httputil left it open)
		g.relayError(w, out, refuse)
		return
	}
	conn, brw, hijackErr := http.NewResponseController(w).Hijack()
	if errors.Is(hijackErr, http.ErrNotSupported) {
		_ = backConn.Close()
		g.relayError(w, out, fmt.Errorf("can't switch protocols using non-Hijacker ResponseWriter type %T", w.ResponseWriter))
		return
	}
	backDone := make(chan struct{})
	go func() {
		// the request's end (a cancel, a shutdown) closes the backend
		select {
		case <-out.Context().Done():
		case <-backDone:
		}
		_ = backConn.Close()
	}()
	defer close(backDone)
	if hijackErr != nil {
		g.relayError(w, out, fmt.Errorf("hijack failed on protocol switch: %w", hijackErr))
		return
	}
	defer conn.Close()
	dst := w.Header()
	for k, vv := range resp.Header {
		for _, v := range vv {
			dst.Add(k, v)
		}
	}
	resp.Header = dst
	resp.Body = nil // resp.Write writes the head only; the body is backConn
	if err := resp.Write(brw); err != nil {
		g.relayError(w, out, fmt.Errorf("response write: %w", err))
		return
	}
	if err := brw.Flush(); err != nil {
		g.relayError(w, out, fmt.Errorf("response flush: %w", err))
		return
	}
	errc := make(chan error, 1)
	go copyHalf(conn, backConn, errc) // backend → client
	go copyHalf(backConn, conn, errc) // client → backend
	// both directions ended cleanly, or one failed
	if err := <-errc; err == nil {
		<-errc
	}
}

// errCopyDone: one direction of an upgraded connection ended and the other
// side cannot be half-closed.
var errCopyDone = errors.New("gateway: upgraded connection copy complete")

// copyHalf copies one direction of an upgraded connection; at the source's
// end it half-closes the destination when it can, so that the other
// direction goes on.
func copyHalf(dst io.Writer, src io.Reader, errc chan<- error) {
	if _, err := io.Copy(dst, src); err != nil {
		errc <- err
		return
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		errc <- cw.CloseWrite()
		return
	}
	errc <- errCopyDone
}

// interim forwards the 1xx answers http.Transport reports
// (httptrace.ClientTrace.Got1xxResponse: 100 Continue, 103 Early Hints) to
// the client until the final answer is in, as ReverseProxy did. The
// dispatcher attaches it to the attempts that go through http.Transport
// (send); the gateway's own HTTP/1.1 client skips interim answers. It lives
// in the request's exchange; its hook is bound on the first attempt that
// needs it, so that a request without one pays no closure.
type interim struct {
	mu    sync.Mutex
	w     http.ResponseWriter
	done  bool // the final answer (or an error) is in: no more 1xx
	trace httptrace.ClientTrace
}

// attach returns ctx with i's hook as its client trace; ctx itself when i
// is nil.
func (i *interim) attach(ctx context.Context) context.Context {
	if i == nil {
		return ctx
	}
	i.mu.Lock()
	if i.trace.Got1xxResponse == nil {
		i.trace.Got1xxResponse = i.got1xx
	}
	i.mu.Unlock()
	return httptrace.WithClientTrace(ctx, &i.trace)
}

func (i *interim) got1xx(code int, header textproto.MIMEHeader) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.done {
		return nil // an attempt that outlived its request (a stale-on-error load)
	}
	h := i.w.Header()
	for k, vv := range header {
		for _, v := range vv {
			h.Add(k, v)
		}
	}
	i.w.WriteHeader(code)
	clear(h) // a 1xx's header is its own: WriteHeader does not reset it
	return nil
}

// end stops the forwarding: the final answer follows.
func (i *interim) end() {
	i.mu.Lock()
	i.done = true
	i.mu.Unlock()
}
