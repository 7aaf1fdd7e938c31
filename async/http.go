package async

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/veerhq/veer/outcome"
)

// StatusPath is the prefix of the status API: GET StatusPath+"{id}" and
// GET StatusPath (the tenant's list, ?cursor=&limit=).
const StatusPath = "/v1/invocations/"

// MaxListLimit bounds a page of the list.
const MaxListLimit = 100

// PrefersAsync reports whether a request asks for asynchronous processing
// (RFC 7240 Prefer: respond-async).
func PrefersAsync(h http.Header) bool {
	for _, v := range h.Values("Prefer") {
		for p := range strings.SplitSeq(v, ",") {
			p, _, _ = strings.Cut(p, ";")
			if strings.EqualFold(strings.TrimSpace(p), "respond-async") {
				return true
			}
		}
	}
	return false
}

// Delay headers of a submission: run no earlier than a duration from now
// (Veer-Delay: 30s, a Go duration or whole seconds) or than a time
// (Veer-Not-Before: an RFC 3339 time).
const (
	DelayHeader     = "Veer-Delay"
	NotBeforeHeader = "Veer-Not-Before"
)

// ParseDelay reads a submission's delay headers: the time before which it
// must not run, zero for none (or a Veer-Not-Before already past). Both
// headers, either twice, a malformed or negative value, or a time more
// than max after now are ErrBadDelay.
func ParseDelay(h http.Header, now time.Time, max time.Duration) (time.Time, error) {
	ds, ts := h.Values(DelayHeader), h.Values(NotBeforeHeader)
	switch {
	case len(ds)+len(ts) == 0:
		return time.Time{}, nil
	case len(ds)+len(ts) > 1:
		return time.Time{}, fmt.Errorf("%w: send one %s or one %s", ErrBadDelay, DelayHeader, NotBeforeHeader)
	}
	var at time.Time
	if len(ds) == 1 {
		v := strings.TrimSpace(ds[0])
		d, err := time.ParseDuration(v)
		if err != nil {
			n, nerr := strconv.ParseUint(v, 10, 32)
			if nerr != nil {
				return time.Time{}, fmt.Errorf("%w: %s %q: want a duration (30s, 5m) or whole seconds", ErrBadDelay, DelayHeader, v)
			}
			d = time.Duration(n) * time.Second
		}
		if d < 0 {
			return time.Time{}, fmt.Errorf("%w: %s %q is negative", ErrBadDelay, DelayHeader, v)
		}
		if d > max {
			return time.Time{}, fmt.Errorf("%w: %s %q is beyond the %s maximum", ErrBadDelay, DelayHeader, v, max)
		}
		if d == 0 {
			return time.Time{}, nil
		}
		at = now.Add(d)
	} else {
		v := strings.TrimSpace(ts[0])
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return time.Time{}, fmt.Errorf("%w: %s %q: want an RFC 3339 time", ErrBadDelay, NotBeforeHeader, v)
		}
		if t.Sub(now) > max {
			return time.Time{}, fmt.Errorf("%w: %s %q is more than %s ahead", ErrBadDelay, NotBeforeHeader, v, max)
		}
		if !t.After(now) {
			return time.Time{}, nil
		}
		at = t
	}
	return at, nil
}

// submitReply is the body of a 202.
type submitReply struct {
	ID       string `json:"id"`
	State    State  `json:"state"`
	Location string `json:"location"`
	Existing bool   `json:"existing,omitempty"`
}

// ServeSubmit answers a submission: 202 Accepted with the invocation id and
// Location once stored; 413 for a body above MaxBody, 400 for a malformed
// Idempotency-Key or callback, 503 with Retry-After when the store is
// unreachable (nothing accepted).
func (s *Service) ServeSubmit(w http.ResponseWriter, r *http.Request, tenant, route string) {
	key, err := ParseKey(r.Header)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if len(tenant) > MaxTenantLength {
		http.Error(w, "async: tenant name too long", http.StatusBadRequest)
		return
	}
	cb := r.Header.Get(CallbackHeader)
	if cb != "" {
		if u, err := url.Parse(cb); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			http.Error(w, "async: "+CallbackHeader+" must be an http(s) URL", http.StatusBadRequest)
			return
		}
	}
	notBefore, err := ParseDelay(r.Header, s.clk.Now(), s.cfg.MaxDelay)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if r.ContentLength > s.cfg.MaxBody {
		http.Error(w, ErrTooLarge.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		body, err = io.ReadAll(io.LimitReader(r.Body, s.cfg.MaxBody+1))
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				http.Error(w, ErrTooLarge.Error(), http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "async: reading the body: "+err.Error(), http.StatusBadRequest)
			return
		}
		if int64(len(body)) > s.cfg.MaxBody {
			http.Error(w, ErrTooLarge.Error(), http.StatusRequestEntityTooLarge)
			return
		}
	}
	h := r.Header.Clone()
	for _, k := range []string{"Prefer", KeyHeader, CallbackHeader, IDHeader, AttemptHeader, DelayHeader, NotBeforeHeader, "Connection", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "Upgrade", "Proxy-Connection", "Content-Length"} {
		h.Del(k)
	}
	inv := &Invocation{Tenant: tenant, Route: route, Method: r.Method, Host: r.Host, Path: r.URL.RequestURI(),
		Header: h, Body: body, Key: key, Callback: cb, NotBefore: notBefore}
	id, existing, err := s.Submit(r.Context(), inv)
	switch {
	case errors.Is(err, ErrTooLarge):
		http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		return
	case errors.Is(err, ErrBadDelay):
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	case err != nil:
		s.log.Warn("async: submission not stored", "err", err)
		outcome.WriteHTTP(w, outcome.Outcome{Kind: outcome.Overloaded, RetryAfter: DefaultRetryAfter, Err: err}, "async store unavailable")
		return
	}
	loc := StatusPath + id
	w.Header().Set("Location", loc)
	w.Header().Set(IDHeader, id)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_ = json.NewEncoder(w).Encode(submitReply{ID: id, State: Queued, Location: loc, Existing: existing})
}

// listReply is the body of the list.
type listReply struct {
	Invocations []Status `json:"invocations"`
	Next        string   `json:"next,omitempty"`
}

// ServeStatus answers GET StatusPath{id} (200 with the Status, 404 for an
// unknown id or another tenant's, 400 for a malformed one) and GET
// StatusPath (the tenant's invocations, ?cursor= from the previous page's
// next, ?limit= up to MaxListLimit, default 20). Other methods get 405,
// a store failure 503.
func (s *Service) ServeStatus(w http.ResponseWriter, r *http.Request, tenant string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	id := strings.TrimPrefix(r.URL.Path, StatusPath)
	if r.URL.Path == strings.TrimSuffix(StatusPath, "/") || id == "" {
		s.serveList(w, r, tenant)
		return
	}
	st, err := s.Status(r.Context(), tenant, id)
	switch {
	case errors.Is(err, ErrBadID):
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	case errors.Is(err, ErrNotFound):
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	case err != nil:
		outcome.WriteHTTP(w, outcome.Outcome{Kind: outcome.Overloaded, RetryAfter: DefaultRetryAfter, Err: err}, "async store unavailable")
		return
	}
	writeJSON(w, st)
}

func (s *Service) serveList(w http.ResponseWriter, r *http.Request, tenant string) {
	q := r.URL.Query()
	var cursor uint64
	if c := q.Get("cursor"); c != "" {
		v, err := strconv.ParseUint(c, 10, 64)
		if err != nil {
			http.Error(w, "async: bad cursor", http.StatusBadRequest)
			return
		}
		cursor = v
	}
	limit := 20
	if l := q.Get("limit"); l != "" {
		v, err := strconv.Atoi(l)
		if err != nil || v < 1 || v > MaxListLimit {
			http.Error(w, "async: limit must be in [1, "+strconv.Itoa(MaxListLimit)+"]", http.StatusBadRequest)
			return
		}
		limit = v
	}
	sts, next, err := s.List(r.Context(), tenant, cursor, limit)
	if err != nil {
		outcome.WriteHTTP(w, outcome.Outcome{Kind: outcome.Overloaded, RetryAfter: DefaultRetryAfter, Err: err}, "async store unavailable")
		return
	}
	rep := listReply{Invocations: sts}
	if next != 0 {
		rep.Next = strconv.FormatUint(next, 10)
	}
	writeJSON(w, rep)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v)
}
