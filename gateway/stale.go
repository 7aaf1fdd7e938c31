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
	"sync"

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
	res    result // what the load that fetched it did
}

// answerError carries an upstream answer that is not cacheable (not 2xx,
// or too big) through the cache's loader, so that it is relayed when no
// stale value can be served.
type answerError struct {
	answer *cachedResponse // read whole: waiters of one load share it
	err    error
	res    result
}

func (e *answerError) Error() string {
	if e.err != nil {
		return e.err.Error()
	}
	return "gateway: upstream answered " + strconv.Itoa(e.answer.status)
}

type loadReqKey struct{}

// loadReq is what a stale-on-error load works on: the request of the
// caller that started it and a copy of that caller's dispatch input. The
// load runs detached from the caller (who may give up and return); it
// writes nothing the caller reads.
type loadReq struct {
	req *http.Request
	in  input
}

// answerCache is a route's stale-on-error cache of answers. Each waiter of
// a load learns what the load did: a loaded or relayed answer carries the
// load's result; a stale answer served because the load failed takes the
// result from the note the failed load left for the waiters of its key.
type answerCache struct {
	c *cache.Cache[*cachedResponse]
	d *dispatcher

	mu    sync.Mutex
	notes map[string]*loadNote // keys with a caller in Get; bounded by them
}

// loadNote is the result of the last load of a key that failed, for the
// callers in Get at the time.
type loadNote struct {
	refs int
	res  result
}

func newAnswerCache(g *Gateway, cfg cache.Config, name string) (*answerCache, error) {
	ac := &answerCache{d: &dispatcher{g: g}, notes: map[string]*loadNote{}}
	var err error
	ac.c, err = cache.New(cfg, ac.load, cache.Options{Name: "gateway_" + name, Registerer: g.reg})
	return ac, err
}

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

// load is the cache's loader: it dispatches the request of the caller
// that started the load, on that caller's copied input.
func (ac *answerCache) load(ctx context.Context, key string) (*cachedResponse, error) {
	lr := ctx.Value(loadReqKey{}).(*loadReq)
	resp, res, err := ac.d.attempts(lr.req.Clone(ctx), &lr.in)
	if err != nil {
		ac.noteFailure(key, res)
		return nil, &answerError{err: err, res: res}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxCachedBody+1))
	_ = resp.Body.Close()
	if err != nil {
		ac.noteFailure(key, res)
		return nil, &answerError{err: err, res: res}
	}
	if len(body) > maxCachedBody {
		ac.noteFailure(key, res)
		return nil, &answerError{err: errors.New("gateway: answer too large to cache"), res: res}
	}
	a := &cachedResponse{status: resp.StatusCode, header: resp.Header.Clone(), body: body, res: res}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		ac.noteFailure(key, res)
		return nil, &answerError{answer: a, res: res}
	}
	return a, nil
}

func (ac *answerCache) noteFailure(key string, res result) {
	ac.mu.Lock()
	if n := ac.notes[key]; n != nil {
		n.res = res
	}
	ac.mu.Unlock()
}

// cached answers a GET on a stale-on-error route through the route's
// cache: fresh answers within the TTL (no attempt), a stale one when the
// upstream fails. It runs on the request's goroutine and returns what the
// load it waited for did.
func (d *dispatcher) cached(req *http.Request, in *input) (*http.Response, result, bool, error) {
	ac := in.route.cache
	key := cacheKey(req)
	ac.mu.Lock()
	n := ac.notes[key]
	if n == nil {
		n = &loadNote{}
		ac.notes[key] = n
	}
	n.refs++
	ac.mu.Unlock()
	ctx := context.WithValue(req.Context(), loadReqKey{}, &loadReq{req: req, in: *in})
	v, status, err := ac.c.Get(ctx, key)
	ac.mu.Lock()
	noted := n.res
	if n.refs--; n.refs == 0 {
		delete(ac.notes, key)
	}
	ac.mu.Unlock()
	if err != nil {
		var ae *answerError
		if errors.As(err, &ae) {
			if ae.answer != nil {
				return ae.answer.response(req, false), ae.res, false, nil
			}
			return nil, ae.res, false, ae.err
		}
		return nil, result{}, false, err
	}
	switch status {
	case cache.Stale:
		d.g.m.staleServed.WithLabelValues(in.route.cfg.Name).Inc()
		return v.response(req, true), noted, true, nil
	case cache.Loaded:
		return v.response(req, false), v.res, false, nil
	}
	return v.response(req, false), result{}, false, nil
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
