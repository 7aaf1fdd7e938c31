package gateway

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/veerhq/veer/gateway/internal/h1"
	"github.com/veerhq/veer/limit"
	"github.com/veerhq/veer/outcome"
	"github.com/veerhq/veer/retry"
	"github.com/veerhq/veer/shed"
	"github.com/veerhq/veer/tier"
)

// serveHTTP runs the guards in their fixed order, then dispatches:
//
//	route match (404) → body guard (413) → limits (429, limit.AdmitHTTP)
//	→ criticality shedding (503, shed.AdmitHTTP) → per-cluster breaker
//	(503, in the dispatcher) → dispatch with cross-cluster retry.
func (g *Gateway) serveHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	t := g.snap.Load()
	x := &exchange{rec: recorder{ResponseWriter: w}, st: reqState{input: input{snap: t}}} // one allocation for both
	rec, st := &x.rec, &x.st
	defer g.finish(rec, r, st, start)
	if r.URL.Path == outcome.HealthPath {
		g.serveClientHealth(rec, r, t, st)
		return
	}
	if g.serveAsyncStatus(rec, r, t) {
		return
	}
	rt := t.match(r.Host, r.URL.Path)
	if rt == nil {
		http.Error(rec, "no route", http.StatusNotFound)
		return
	}
	st.route = rt
	if st.trusted = t.trustedAddr(r.RemoteAddr); !st.trusted {
		// by their canonical keys: Header.Del canonicalizes on every call
		delete(r.Header, tierKey)
		delete(r.Header, callerKey)
	}
	if err := g.body.Apply(w, r, t.cfg.Limits.MaxRequestBody); err != nil {
		g.refuseBody(rec, t)
		return
	}
	if g.admitter != nil && len(t.keys) > 0 {
		var buf [8]string
		keys := buf[:len(t.keys)]
		t.fillKeys(r, rt, keys)
		// the tier the rejection is counted under: the one shedding would
		// give the request (veer_limit_rejected_total{tier})
		stated, caller := tier.ParseHeader(r.Header)
		if g.shedder != nil {
			stated = g.shedder.Resolve(rt.cfg.Name, caller, stated)
		}
		res, ok := limit.AdmitHTTPAs(g.admitter, rec, r, keys, stated) // keys bounded there
		if !ok {
			g.m.rejected.WithLabelValues("limit").Inc()
			return
		}
		defer res.Permit.Release()
	}
	if g.shedder != nil {
		// the route is the endpoint; Veer-Timeout-Ms, storm pacing and
		// critical-connection marking as in shed.Middleware
		var adm shed.HTTPAdmission
		var ok bool
		g.callers.observe(start, rt.cfg.Name, tier.CallerFromHeader(r.Header)) // callers.go: GET /admin/callers
		if r, adm, ok = g.shedder.AdmitHTTP(rec, r, rt.cfg.Name); !ok {
			g.m.rejected.WithLabelValues("shed").Inc()
			return
		}
		defer adm.Done()
	}
	if g.submitAsync(rec, r, rt) {
		return
	}
	if err := st.bufferBody(r, t.cfg.Retry.MaxReplayBody); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			g.refuseBody(rec, t)
			return
		}
		http.Error(rec, "bad request body", http.StatusBadRequest)
		return
	}
	st.idempotent = retry.Idempotent(r.Method, r.Header)
	g.relay(rec, r, x)
}

// The canonical keys of the tier and caller fields.
var tierKey, callerKey = http.CanonicalHeaderKey(tier.Header), http.CanonicalHeaderKey(tier.CallerHeader)

// refuseBody answers 413 for a body over limits.max_request_body; the
// answer is counted and logged by finish like every other.
func (g *Gateway) refuseBody(w http.ResponseWriter, t *table) {
	g.m.rejected.WithLabelValues("body").Inc()
	limit.WriteBodyTooLarge(w, t.cfg.Limits.MaxRequestBody)
}

// exchange holds what one request needs from its start to its end,
// allocated together: its recorder and state, and the relay's outgoing
// context, URL and 1xx forwarder (relay.go).
type exchange struct {
	rec recorder
	st  reqState
	ctx relayCtx
	url url.URL
	fwd interim
	// the fields the relay sets and their values (outHeader)
	extra [10]h1.Field
	vals  [7]string
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
	st.trailer = len(r.Trailer) > 0
	st.replayable = true
	r.Body = http.NoBody
	r.ContentLength = int64(len(b))
	r.TransferEncoding = nil
	return nil
}

// bodyLength is the length to send a buffered body with: -1 (chunked)
// when it came with trailers, which only a chunked body can carry.
func (st *input) bodyLength() int64 {
	if st.trailer {
		return -1
	}
	return int64(len(st.body))
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

// appendForwarded appends the Forwarded value to send: this hop's RFC
// 7239 element for the client at host (its address without the port),
// after the caller's elements when the caller is trusted.
func appendForwarded(b []byte, in *http.Request, trusted bool, host string) []byte {
	if prev := in.Header["Forwarded"]; trusted && len(prev) > 0 {
		for _, p := range prev {
			b = append(append(b, p...), ", "...)
		}
	}
	b = append(b, "for="...)
	if strings.Contains(host, ":") {
		b = append(append(append(b, `"[`...), host...), `]"`...)
	} else {
		b = append(b, host...)
	}
	b = appendQuotedForwarded(append(b, ";host="...), in.Host)
	if in.TLS != nil {
		return append(b, ";proto=https"...)
	}
	return append(b, ";proto=http"...)
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

// appendQuotedForwarded appends s as an RFC 7239 value: a token, or a
// quoted string.
func appendQuotedForwarded(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '.' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			b = append(b, '"')
			for j := 0; j < len(s); j++ {
				if s[j] == '\\' || s[j] == '"' {
					b = append(b, '\\')
				}
				b = append(b, s[j])
			}
			return append(b, '"')
		}
	}
	return append(b, s...)
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
	if status >= 500 {
		// the gateway's own refusals say what they were (upstream_unavailable,
		// connect_refused, ...), which the status alone does not. Only
		// then: Header() after WriteHeader makes the HTTP/1 server keep a
		// copy of the header (net/http's rule: later changes are not sent),
		// which every answer would pay for.
		if v := rec.Header()[outcome.HeaderOutcome]; len(v) > 0 {
			if k, err := outcome.ParseKind(v[0]); err == nil {
				kind = k
			}
		}
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
		sp.Route, sp.Cluster, sp.Backend, sp.Attempts = name, st.res.cluster, st.res.backend, st.res.attempts
		g.opts.OnSpan(sp)
	}
	if g.alog != nil {
		g.alog.submit(logEntry{
			time: start, method: r.Method, host: r.Host, path: r.URL.Path, proto: r.Proto,
			remote: r.RemoteAddr, status: status, bytes: rec.bytes, dur: d, route: name,
			cluster: st.res.cluster, backend: st.res.backend, attempts: st.res.attempts, stale: st.stale,
			traceID: st.hop.traceID,
		})
	}
}
