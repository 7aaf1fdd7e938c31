package limit

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// ErrBodyTooLarge is returned when reading a body past its limit.
var ErrBodyTooLarge = errors.New("limit: body too large")

func bodyCounter(reg prometheus.Registerer, dir string) prometheus.Counter {
	return newMetrics(reg).body.WithLabelValues(dir)
}

// BodyLimit returns middleware that caps request bodies at max bytes: a
// request whose Content-Length exceeds max is answered 413 before a byte of
// its body is read; a body without a declared length (chunked) is read
// through http.MaxBytesReader, so the handler's read fails at max+1 bytes
// and the server closes the connection instead of buffering the rest.
// reg receives veer_limit_body_rejected_total (nil: the default registry).
func BodyLimit(max int64, reg prometheus.Registerer) func(http.Handler) http.Handler {
	return BodyLimitFunc(func() int64 { return max }, reg)
}

// BodyLimitFunc is BodyLimit with the limit read for each request, e.g.
// Limiter.MaxRequestBody, so that a config reload changes it (0: no limit).
func BodyLimitFunc(maxFn func() int64, reg prometheus.Registerer) func(http.Handler) http.Handler {
	guard := NewBodyGuard(reg)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			max := maxFn()
			if err := guard.Apply(w, r, max); err != nil {
				WriteBodyTooLarge(w, max)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// BodyGuard is BodyLimit's rule for one request at a time, for a handler
// that applies it at its own step (the gateway does, after its route match,
// so that the refusal is routed, counted and logged like its others).
type BodyGuard struct{ rejected prometheus.Counter }

// NewBodyGuard returns a BodyGuard counting its refusals in
// veer_limit_body_rejected_total on reg (nil: the default registry).
func NewBodyGuard(reg prometheus.Registerer) *BodyGuard {
	return &BodyGuard{rejected: bodyCounter(reg, "request")}
}

// Apply returns ErrBodyTooLarge, reading nothing, when r declares a body
// over max bytes (the caller answers 413, e.g. with WriteBodyTooLarge);
// otherwise it wraps a body of undeclared length so that a read past max
// fails with an *http.MaxBytesError (and the server, w being its
// ResponseWriter, closes the connection after the answer). max <= 0: no
// limit.
func (g *BodyGuard) Apply(w http.ResponseWriter, r *http.Request, max int64) error {
	if max <= 0 {
		return nil
	}
	if r.ContentLength > max {
		g.rejected.Inc()
		return ErrBodyTooLarge
	}
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = &countingBody{ReadCloser: http.MaxBytesReader(w, r.Body, max), rejected: g.rejected}
	}
	return nil
}

// WriteBodyTooLarge answers 413 and asks the client to close the
// connection (the rest of its body is never read).
func WriteBodyTooLarge(w http.ResponseWriter, max int64) {
	w.Header().Set("Connection", "close")
	http.Error(w, "request body larger than "+strconv.FormatInt(max, 10)+" bytes", http.StatusRequestEntityTooLarge)
}

type countingBody struct {
	io.ReadCloser
	rejected prometheus.Counter
	counted  bool
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	var mbe *http.MaxBytesError
	if err != nil && !b.counted && errors.As(err, &mbe) {
		b.counted = true
		b.rejected.Inc()
	}
	return n, err
}

// ResponseLimit is an http.RoundTripper that guards a client (a gateway
// reading upstream answers) against huge responses: a response declaring
// more than Max bytes is closed and reported as ErrBodyTooLarge; otherwise
// its body fails with ErrBodyTooLarge once Max bytes have been read.
type ResponseLimit struct {
	// Base sends the request; default http.DefaultTransport.
	Base http.RoundTripper
	// Max bytes of a response body; 0 means no limit.
	Max int64
	// Registerer receives veer_limit_body_rejected_total; default the
	// default registry.
	Registerer prometheus.Registerer

	once    sync.Once
	counter prometheus.Counter
}

var _ http.RoundTripper = (*ResponseLimit)(nil)

// RoundTrip implements http.RoundTripper.
func (t *ResponseLimit) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(req)
	if err != nil || t.Max <= 0 {
		return resp, err
	}
	t.once.Do(func() { t.counter = bodyCounter(t.Registerer, "response") })
	if resp.ContentLength > t.Max {
		resp.Body.Close()
		t.counter.Inc()
		return nil, ErrBodyTooLarge
	}
	resp.Body = &limitedBody{rc: resp.Body, left: t.Max, counter: t.counter}
	return resp, nil
}

type limitedBody struct {
	rc      io.ReadCloser
	left    int64
	counter prometheus.Counter
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, ErrBodyTooLarge
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	if int64(n) > b.left {
		n = int(b.left)
		b.left = -1
		b.counter.Inc()
		return n, ErrBodyTooLarge
	}
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }
