package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/veerhq/veer/cache"
)

// maxCachedBody bounds one cached answer; larger answers are relayed but
// not kept.
const maxCachedBody = 1 << 20

// cachedResponse is a successful GET answer kept for stale-on-error.
type cachedResponse struct {
	status int
	header http.Header
	body   []byte
}

// answerError carries an upstream answer that is not cacheable (not 2xx,
// or too big) through the cache's loader, so that it is relayed when no
// stale value can be served.
type answerError struct {
	answer *cachedResponse // read whole: waiters of one load share it
	err    error
}

func (e *answerError) Error() string {
	if e.err != nil {
		return e.err.Error()
	}
	return "gateway: upstream answered " + strconv.Itoa(e.answer.status)
}

type loadReqKey struct{}

// cacheKey names a GET by host, URI and credentials (hashed), so that one
// caller's token answer is never served to another.
func cacheKey(r *http.Request) string {
	h := sha256.New()
	io.WriteString(h, r.Host)
	h.Write([]byte{0})
	io.WriteString(h, r.URL.RequestURI())
	h.Write([]byte{0})
	io.WriteString(h, r.Header.Get("Authorization"))
	h.Write([]byte{0})
	io.WriteString(h, r.Header.Get("Cookie"))
	return hex.EncodeToString(h.Sum(nil))
}

// loadAnswer is the cache's loader: it dispatches the request of the
// caller that started the load.
func (d *dispatcher) loadAnswer(ctx context.Context, _ string) (*cachedResponse, error) {
	lr := ctx.Value(loadReqKey{}).(*http.Request)
	st := stateFrom(lr.Context())
	resp, err := d.attempts(lr.WithContext(ctx), st)
	if err != nil {
		return nil, &answerError{err: err}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxCachedBody+1))
	_ = resp.Body.Close()
	if err != nil {
		return nil, &answerError{err: err}
	}
	if len(body) > maxCachedBody {
		return nil, &answerError{err: errors.New("gateway: answer too large to cache")}
	}
	a := &cachedResponse{status: resp.StatusCode, header: resp.Header.Clone(), body: body}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, &answerError{answer: a}
	}
	return a, nil
}

// cached answers a GET on a stale-on-error route through the route's
// cache: fresh answers within the TTL, a stale one when the upstream fails.
func (d *dispatcher) cached(req *http.Request, st *reqState) (*http.Response, error) {
	ctx := context.WithValue(req.Context(), loadReqKey{}, req)
	v, status, err := st.route.cache.Get(ctx, cacheKey(req))
	if err != nil {
		var ae *answerError
		if errors.As(err, &ae) {
			if ae.answer != nil {
				return ae.answer.response(req, false), nil
			}
			return nil, ae.err
		}
		return nil, err
	}
	if status == cache.Stale {
		st.stale = true
		d.g.m.staleServed.WithLabelValues(st.route.cfg.Name).Inc()
	}
	return v.response(req, st.stale), nil
}

func (v *cachedResponse) response(req *http.Request, stale bool) *http.Response {
	h := v.header.Clone()
	if stale {
		h.Set("Warning", `110 - "Response is Stale"`)
	}
	return &http.Response{
		StatusCode: v.status, Status: strconv.Itoa(v.status) + " " + http.StatusText(v.status),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: h,
		Body: io.NopCloser(bytes.NewReader(v.body)), ContentLength: int64(len(v.body)), Request: req,
	}
}
