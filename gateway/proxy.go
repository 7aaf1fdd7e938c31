package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"time"

	"github.com/veerhq/veer/outcome"
	"github.com/veerhq/veer/retry"
	"github.com/veerhq/veer/tier"
)

// serveHTTP runs the guards in their fixed order, then dispatches:
//
//	body guard (413, wrapped around this handler by New)
//	→ limits (429) → criticality shedding (503) → per-cluster breaker (503,
//	in the dispatcher) → dispatch with cross-cluster retry.
func (g *Gateway) serveHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	t := g.snap.Load()
	x := &exchange{rec: recorder{ResponseWriter: w}, st: reqState{snap: t}} // one allocation for both
	rec, st := &x.rec, &x.st
	defer g.finish(rec, r, st, start)
	if g.serveAsyncStatus(rec, r, t) {
		return
	}
	rt := t.match(r.Host, r.URL.Path)
	if rt == nil {
		http.Error(rec, "no route", http.StatusNotFound)
		return
	}
	st.route = rt
	if !t.trustedAddr(r.RemoteAddr) {
		r.Header.Del(tier.Header)
		r.Header.Del(tier.CallerHeader)
	}
	if g.admitter != nil && len(t.keys) > 0 {
		var buf [8]string
		keys := buf[:len(t.keys)]
		t.fillKeys(r, rt, keys)
		res := g.admitter.Admit(r.Context(), keys)
		if !res.Allowed {
			g.m.rejected.WithLabelValues("limit").Inc()
			outcome.WriteHTTP(rec, res.Outcome(), "limit "+res.Dimension)
			return
		}
		defer res.Permit.Release()
	}
	if g.shedder != nil {
		stated, _ := tier.FromHeader(r.Header)
		tr := g.shedder.Resolve(rt.cfg.Name, tier.CallerFromHeader(r.Header), stated)
		ticket, err := g.shedder.Acquire(r.Context(), rt.cfg.Name, tr)
		if err != nil {
			g.m.rejected.WithLabelValues("shed").Inc()
			g.shedder.WriteRejection(rec, err)
			return
		}
		defer ticket.Release()
	}
	if g.submitAsync(rec, r, rt) {
		return
	}
	if err := st.bufferBody(r, t.cfg.Retry.MaxReplayBody); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			g.m.rejected.WithLabelValues("body").Inc()
			http.Error(rec, "request body too large", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(rec, "bad request body", http.StatusBadRequest)
		return
	}
	st.idempotent = retry.Idempotent(r.Method, r.Header)
	g.proxy.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), stateKey{}, st)))
}

// exchange holds a request's recorder and state, allocated together.
type exchange struct {
	rec recorder
	st  reqState
}

// bufferBody reads a body of at most max bytes so that it can be replayed.
// A larger body streams through and makes the request non-replayable.
func (st *reqState) bufferBody(r *http.Request, max int64) error {
	if r.Body == nil || r.Body == http.NoBody {
		st.replayable = true
		return nil
	}
	if r.ContentLength > max {
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, max+1))
	if err != nil {
		return err
	}
	if int64(len(b)) > max {
		r.Body = readCloser{io.MultiReader(bytes.NewReader(b), r.Body), r.Body}
		return nil
	}
	if len(b) > 0 {
		st.body = b
	}
	st.replayable = true
	r.Body = http.NoBody
	r.ContentLength = int64(len(b))
	r.TransferEncoding = nil
	return nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

func (t *table) fillKeys(r *http.Request, rt *route, keys []string) {
	for i, k := range t.keys {
		switch k.kind {
		case keyRoute:
			keys[i] = rt.cfg.Name
		case keyClientIP:
			keys[i], _, _ = net.SplitHostPort(r.RemoteAddr)
		case keyHost:
			keys[i] = normalizeHost(r.Host)
		case keyHeader:
			keys[i] = r.Header.Get(k.header)
		}
	}
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

type bufferPool struct{}

func (bufferPool) Get() []byte  { return *bufPool.Get().(*[]byte) }
func (bufferPool) Put(b []byte) { bufPool.Put(&b) }

// newReverseProxy builds the relaying part: net/http/httputil removes
// hop-by-hop headers, relays Upgrade (WebSocket) connections, flushes
// streamed answers (unknown length, event streams) as they come, and copies
// trailers (gRPC).
func newReverseProxy(g *Gateway) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			st := stateFrom(pr.In.Context())
			pr.Out.Header["X-Forwarded-For"] = pr.In.Header["X-Forwarded-For"]
			pr.SetXForwarded()
			appendForwarded(pr.Out, pr.In)
			pr.Out.Header.Add("Via", via(pr.In))
			if up := pr.Out.Header.Get("Upgrade"); up != "" && upgradesToH2C(up) {
				// h2c upgrades end here: relayed, a backend that upgrades would
				// take the rest of the connection past routing and every guard.
				pr.Out.Header.Del("Upgrade")
				pr.Out.Header.Del("Connection")
			}
			rnd := g.rng()
			st.hop = propagateTrace(pr.In, pr.Out, rnd, g.opts.SampleNewTraces)
			g.rngs.Put(rnd)
			if h := st.route.cfg.HostRewrite; h != "" {
				pr.Out.Host = h
			}
			if st.body != nil || pr.In.Body == http.NoBody {
				pr.Out.Body = nil
				pr.Out.ContentLength = int64(len(st.body))
			}
		},
		Transport:  &dispatcher{g: g},
		BufferPool: bufferPool{},
		ErrorLog:   newServerLog(g.log), // debug level: failures are counted and logged per request
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			var de *dispatchError
			o := outcome.Outcome{Kind: outcome.NetworkOther, Err: err}
			if errors.As(err, &de) {
				o = de.o
			} else if r.Context().Err() != nil {
				o = outcome.Of(outcome.ClientCanceled)
			}
			if st := stateFrom(r.Context()); st != nil {
				st.kind = o.Kind
			}
			outcome.WriteHTTP(w, o, "upstream "+o.Kind.String())
		},
	}
}

// appendForwarded appends an RFC 7239 element for this hop.
func appendForwarded(out, in *http.Request) {
	host, _, err := net.SplitHostPort(in.RemoteAddr)
	if err != nil {
		host = in.RemoteAddr
	}
	if strings.Contains(host, ":") {
		host = `"[` + host + `]"`
	}
	proto := "http"
	if in.TLS != nil {
		proto = "https"
	}
	el := "for=" + host + ";host=" + quoteForwarded(in.Host) + ";proto=" + proto
	if prev := in.Header.Values("Forwarded"); len(prev) > 0 {
		el = strings.Join(prev, ", ") + ", " + el
	}
	out.Header.Set("Forwarded", el)
}

// via is this hop's Via entry (RFC 9110 §7.6.3, which a gateway MUST send
// upstream): the protocol version the request arrived with, and a pseudonym.
func via(in *http.Request) string {
	switch {
	case in.ProtoMajor == 2:
		return "2 veer"
	case in.ProtoMajor == 3:
		return "3 veer"
	case in.ProtoMinor == 0:
		return "1.0 veer"
	}
	return "1.1 veer"
}

// upgradesToH2C reports whether an Upgrade value offers h2c (RFC 7540
// §3.2, retired by RFC 9113 §3.1).
func upgradesToH2C(v string) bool {
	for _, p := range strings.Split(v, ",") {
		if strings.EqualFold(strings.TrimSpace(p), "h2c") {
			return true
		}
	}
	return false
}

var forwardedEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`)

// quoteForwarded returns s as an RFC 7239 value: a token, or a quoted
// string.
func quoteForwarded(s string) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '.' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return `"` + forwardedEscaper.Replace(s) + `"`
		}
	}
	return s
}

// recorder notes the status written; Unwrap lets http.ResponseController
// reach the connection (flush, hijack for Upgrade).
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 && code >= 200 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *recorder) Flush() {
	_ = http.NewResponseController(r.ResponseWriter).Flush()
}

// finish records metrics and the access log entry of one request.
func (g *Gateway) finish(rec *recorder, r *http.Request, st *reqState, start time.Time) {
	status := rec.status
	if status == 0 {
		status = http.StatusSwitchingProtocols
	}
	name := "none"
	if st.route != nil {
		name = st.route.cfg.Name
	}
	d := time.Since(start)
	kind := outcome.FromHTTPStatus(status)
	if status == http.StatusSwitchingProtocols {
		kind = outcome.Success
	}
	if st.route != nil {
		st.route.m.requests[kind].Inc()
		st.route.m.duration.Observe(d.Seconds())
	} else {
		g.m.requests.WithLabelValues(name, kind.String()).Inc()
	}
	if g.opts.OnSpan != nil && st.hop.traceID != "" {
		sp := st.hop.span()
		sp.Start, sp.End = start, start.Add(d)
		sp.Method, sp.Host, sp.Path, sp.Status = r.Method, r.Host, r.URL.Path, status
		sp.Route, sp.Cluster, sp.Backend, sp.Attempts = name, st.cluster, st.backend, st.attempts
		g.opts.OnSpan(sp)
	}
	if g.alog != nil {
		g.alog.submit(logEntry{
			time: start, method: r.Method, host: r.Host, path: r.URL.Path, proto: r.Proto,
			remote: r.RemoteAddr, status: status, bytes: rec.bytes, dur: d, route: name,
			cluster: st.cluster, backend: st.backend, attempts: st.attempts, stale: st.stale,
			traceID: st.hop.traceID,
		})
	}
}
