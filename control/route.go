package control

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"

	"github.com/veerhq/veer/routing"
)

// maxIDLen bounds device and customer IDs.
const maxIDLen = 256

// readPost reads the body of a public API call: POST only (405 otherwise),
// at most maxPublicBody bytes (413). It has answered the request when ok is
// false.
func readPost(w http.ResponseWriter, r *http.Request) (body []byte, ok bool) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		httpError(w, http.StatusMethodNotAllowed, "POST only")
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxPublicBody))
	if err != nil {
		if _, tooBig := errors.AsType[*http.MaxBytesError](err); tooBig {
			httpError(w, http.StatusRequestEntityTooLarge, "body over 64 KiB")
		} else {
			httpError(w, http.StatusBadRequest, "reading the body: "+err.Error())
		}
		return nil, false
	}
	return body, true
}

// serveRoute is POST /v1/route: the app's first request at each launch.
func (s *Service) serveRoute(w http.ResponseWriter, r *http.Request) {
	body, ok := readPost(w, r)
	if !ok {
		return
	}
	req, err := ParseRouteRequest(body)
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	snap := s.snap.Load()
	if snap == nil {
		w.Header().Set("Retry-After", "5")
		httpError(w, http.StatusServiceUnavailable, ErrNotReady.Error())
		return
	}
	addr := clientAddr(r, s.trusted)
	a := snap.decide(addr, req.DeviceID, req.CustomerID)
	s.m.count(a.Rule)
	s.recent.add(Probe{Addr: addr, DeviceID: req.DeviceID, CustomerID: req.CustomerID})
	h := w.Header()
	h["Content-Type"] = jsonType
	buf := bodyPool.Get().(*[]byte)
	*buf = snap.appendBody((*buf)[:0], a, req.Subject(), s.clk.Now())
	w.Write(*buf)
	bodyPool.Put(buf)
}

var jsonType = []string{"application/json"}

// bodyPool holds the buffers signed answers are written from.
var bodyPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// ParseRouteRequest decodes and validates a POST /v1/route body. Unknown
// fields are ignored; a device or customer ID is required.
func ParseRouteRequest(body []byte) (routing.Request, error) {
	var req routing.Request
	if err := json.Unmarshal(body, &req); err != nil {
		return req, fmt.Errorf("bad JSON: %v", err)
	}
	if req.DeviceID == "" && req.CustomerID == "" {
		return req, fmt.Errorf("device_id or customer_id is required")
	}
	if len(req.DeviceID) > maxIDLen || len(req.CustomerID) > maxIDLen {
		return req, fmt.Errorf("device_id and customer_id: at most %d bytes", maxIDLen)
	}
	return req, nil
}

// connAddr is the address of the request's connection.
func connAddr(r *http.Request) netip.Addr {
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		return ap.Addr().Unmap()
	}
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	a, _ := netip.ParseAddr(host)
	return a.Unmap()
}

// clientAddr is the client's address: the connection's, or, when the
// connection comes from a trusted proxy, the right-most address of
// X-Forwarded-For that is not a trusted proxy.
func clientAddr(r *http.Request, trusted []netip.Prefix) netip.Addr {
	a := connAddr(r)
	if !inAny(trusted, a) {
		return a
	}
	xff := r.Header.Values("X-Forwarded-For")
	for i := len(xff) - 1; i >= 0; i-- {
		parts := strings.Split(xff[i], ",")
		for j := len(parts) - 1; j >= 0; j-- {
			h, err := netip.ParseAddr(strings.TrimSpace(parts[j]))
			if err != nil {
				return a // malformed: do not guess
			}
			if h = h.Unmap(); !inAny(trusted, h) {
				return h
			}
		}
	}
	return a
}

func inAny(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// httpError writes a JSON error.
func httpError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
