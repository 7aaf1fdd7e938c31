// Package doh serves DNS over HTTPS (RFC 8484) for a dnsserver.Server:
// GET (?dns=, base64url) and POST (application/dns-message) on one path,
// over HTTP/2 (TLS over TCP) and HTTP/3 (QUIC over UDP) on the same port,
// with an Alt-Svc header pointing HTTP/2 clients at HTTP/3.
//
// It is a sub-package so that users of dnsserver's core do not link QUIC.
//
// Contract: the handler answers 200 with the DNS answer, whatever its rcode;
// HTTP errors are for HTTP problems: 400 (no or undecodable dns parameter, a
// malformed DNS message), 405 (another method), 413 (a body over 65535
// bytes), 415 (a POST of another media type). Memory per request is bounded
// by the 64 KiB DNS message limit.
package doh

import (
	"encoding/base64"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/miekg/dns"

	"github.com/veerhq/veer/dnsserver"
)

// MediaType is RFC 8484's media type of a DNS message.
const MediaType = "application/dns-message"

// maxMsg is the largest DNS message.
const maxMsg = 65535

// Answerer answers one query in wire format; *dnsserver.Server is one.
type Answerer interface {
	Answer(wire []byte, src netip.Addr, tr dnsserver.Transport, buf []byte) ([]byte, bool)
}

var _ Answerer = (*dnsserver.Server)(nil)

// NewHandler returns the RFC 8484 endpoint for a (mount it at the path).
func NewHandler(a Answerer) http.Handler { return &handler{a: a} }

type handler struct{ a Answerer }

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var wire []byte
	switch r.Method {
	case http.MethodGet:
		q := r.URL.Query().Get("dns")
		if q == "" {
			http.Error(w, "missing dns parameter", http.StatusBadRequest)
			return
		}
		if len(q) > base64.RawURLEncoding.EncodedLen(maxMsg)+2 {
			http.Error(w, "dns parameter too long", http.StatusRequestURITooLong)
			return
		}
		var err error
		wire, err = base64.RawURLEncoding.DecodeString(strings.TrimRight(q, "="))
		if err != nil {
			http.Error(w, "dns parameter is not base64url", http.StatusBadRequest)
			return
		}
	case http.MethodPost:
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != MediaType {
			http.Error(w, "content type must be "+MediaType, http.StatusUnsupportedMediaType)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxMsg))
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				http.Error(w, "DNS message larger than 65535 bytes", http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "reading body: "+err.Error(), http.StatusBadRequest)
			return
		}
		wire = body
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	var src netip.Addr
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		src = ap.Addr().Unmap()
	}
	resp, ok := h.a.Answer(wire, src, dnsserver.DoH, make([]byte, maxMsg))
	if !ok {
		http.Error(w, "malformed DNS message", http.StatusBadRequest)
		return
	}
	hdr := w.Header()
	hdr.Set("Content-Type", MediaType)
	hdr.Set("Content-Length", strconv.Itoa(len(resp)))
	if age, ok := maxAge(resp); ok {
		hdr.Set("Cache-Control", "max-age="+strconv.FormatUint(uint64(age), 10))
	}
	w.WriteHeader(http.StatusOK)
	w.Write(resp)
}

// maxAge is the smallest TTL of the answer's records (RFC 8484 section
// 5.1); for a negative answer, that of the SOA.
func maxAge(wire []byte) (uint32, bool) {
	var m dns.Msg
	if err := m.Unpack(wire); err != nil {
		return 0, false
	}
	found := false
	var age uint32
	for _, sec := range [][]dns.RR{m.Answer, m.Ns} {
		for _, rr := range sec {
			if t := rr.Header().Ttl; !found || t < age {
				age, found = t, true
			}
		}
	}
	return age, found
}
