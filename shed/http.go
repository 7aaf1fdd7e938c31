package shed

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/veerhq/veer/tier"
)

// TimeoutHeader carries the caller's time budget for the request, in whole
// milliseconds from when it was sent (relative, like gRPC's grpc-timeout, so
// that clocks need not agree). The middleware gives the request a context
// deadline that far from its arrival, so that the stage drops it when the
// deadline would pass before it could start, and the handler sees the
// deadline. A malformed value, or one above MaxTimeout, is ignored.
const TimeoutHeader = "Veer-Timeout-Ms"

// MaxTimeout is the largest budget TimeoutHeader may state.
const MaxTimeout = 24 * time.Hour

// parseTimeout decodes a TimeoutHeader value: 1 to 8 decimal digits, at
// least 1 ms and at most MaxTimeout.
func parseTimeout(v string) (time.Duration, bool) {
	if len(v) == 0 || len(v) > 8 {
		return 0, false
	}
	var ms int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		ms = ms*10 + int64(c-'0')
	}
	d := time.Duration(ms) * time.Millisecond
	if d <= 0 || d > MaxTimeout {
		return 0, false
	}
	return d, true
}

// UnmatchedEndpoint names the stage of requests that the wrapped ServeMux
// does not route (404s, including random paths).
const UnmatchedEndpoint = "unmatched"

// Middleware sheds requests to next per endpoint and tier. Handlers do not
// change. When the request stated a tier or a caller, the admitted request
// runs next with its context carrying the resolved tier and the caller
// (tier.FromContext), ready for propagation with tier.Transport; requests
// that stated neither keep their context (the unloaded path allocates
// nothing it need not). A shed request gets 503 with Retry-After
// and a small JSON body naming the reason (outcome.WriteHTTP).
//
// The endpoint of a request is, in order: Config.Endpoint(r) when set; the
// route pattern of next when next is an *http.ServeMux (found with
// mux.Handler, as the middleware runs before the mux has matched; requests
// the mux does not route share UnmatchedEndpoint); r.Pattern when the
// middleware is mounted inside a mux; else the URL path. The number of
// endpoints is bounded by MaxEndpoints.
//
// The tier is the Veer-Criticality header when the caller (Rpc-Caller) may
// set it, else the endpoint × caller table, else the default. A malformed
// header counts as absent. A TimeoutHeader gives the request a deadline.
func (s *Shedder) Middleware(next http.Handler) http.Handler {
	mux, _ := next.(*http.ServeMux)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, adm, ok := s.AdmitHTTP(w, r, s.endpointOf(r, mux))
		if !ok {
			return
		}
		defer adm.Done()
		next.ServeHTTP(w, r)
	})
}

// HTTPAdmission is an admitted request's hold on its endpoint; Done ends
// it (the slot is freed, the TimeoutHeader deadline released).
type HTTPAdmission struct {
	tk     Ticket
	cancel context.CancelFunc
}

// Done frees what AdmitHTTP took; call it once, when the request is done.
func (a HTTPAdmission) Done() {
	a.tk.Release()
	if a.cancel != nil {
		a.cancel()
	}
}

// AdmitHTTP is Middleware's admission of one request to endpoint, for a
// handler that names endpoints itself (the gateway: its route names): the
// tier from Veer-Criticality and Rpc-Caller (resolved as Middleware does),
// the TimeoutHeader deadline, critical-connection marking, then the
// endpoint's stage. Admitted, it returns the request to serve (with the
// deadline and, when stated, the tier and caller in its context) and ok;
// the caller must call the admission's Done when the request is done.
// Refused, it has held the refusal when the endpoint is in a rejection
// storm (pace.go) and written it to w (503 with Retry-After, the
// ReasonHeader and a JSON body), and returns ok false.
func (s *Shedder) AdmitHTTP(w http.ResponseWriter, r *http.Request, endpoint string) (*http.Request, HTTPAdmission, bool) {
	var adm HTTPAdmission
	stated, caller := tier.ParseHeader(r.Header)
	if v := r.Header[TimeoutHeader]; len(v) > 0 {
		if d, ok := parseTimeout(v[0]); ok {
			var ctx context.Context
			ctx, adm.cancel = context.WithTimeout(r.Context(), d)
			r = r.WithContext(ctx)
		}
	}
	p := s.pol.Load()
	t := p.resolve(endpoint, caller, stated)
	s.markConn(p, t, r.RemoteAddr) // a critical request's connection is never held (pace.go)
	st := s.stage(endpoint)
	tk, err := st.acquire(r.Context(), t, p)
	if err != nil {
		s.holdRefusal(r, st, p)
		p.wire[reasonOf(err)].write(w, r)
		adm.Done()
		return r, HTTPAdmission{}, false
	}
	adm.tk = tk
	if stated != tier.Unset || caller != "" {
		ctx := tier.WithTier(r.Context(), t)
		if caller != "" {
			ctx = tier.WithCaller(ctx, caller)
		}
		r = r.WithContext(ctx)
	}
	return r, adm, true
}

func (s *Shedder) endpointOf(r *http.Request, mux *http.ServeMux) string {
	if s.endpointFn != nil {
		return s.endpointFn(r)
	}
	if mux != nil {
		_, pattern := mux.Handler(r)
		if pattern == "" {
			return UnmatchedEndpoint
		}
		return pattern
	}
	if r.Pattern != "" {
		return r.Pattern
	}
	return r.URL.Path
}

// WriteRejection writes err (from Acquire) as an HTTP rejection: 503 with
// Retry-After, the ReasonHeader and a JSON body naming the reason
// (outcome.WriteHTTP's form, prebuilt).
func (s *Shedder) WriteRejection(w http.ResponseWriter, err error) {
	s.pol.Load().wire[reasonOf(err)].write(w, nil)
}

// reasonOf is the reason of a rejection; overload for any other error.
func reasonOf(err error) Reason {
	if rj, ok := err.(*Rejection); ok && rj.Reason < numReasons {
		return rj.Reason
	}
	return ReasonOverload
}

// RetryAfter is the delay advertised with rejections.
func (s *Shedder) RetryAfter() time.Duration { return s.pol.Load().retryAfter }

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
