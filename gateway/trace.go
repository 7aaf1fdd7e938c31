package gateway

import (
	"encoding/hex"
	"math/rand/v2"
	"net/http"
	"time"
)

// W3C trace context (https://www.w3.org/TR/trace-context/): the gateway is
// one hop of a trace. It keeps the caller's trace id and flags, and
// forwards a traceparent naming a new span id of its own as the parent;
// without a valid traceparent it starts a trace (not sampled). tracestate
// passes through unchanged, and is dropped with an invalid traceparent, as
// the specification asks. Spans are not exported (no OTLP in this build).

const traceparentLen = 55 // 00-<32 hex>-<16 hex>-<2 hex>

// parseTraceparentParent returns the parent id of a valid traceparent.
func parseTraceparentParent(v string) string { return v[36:52] }

// parseTraceparent returns the trace id and flags of a version-00
// traceparent, or ok=false. Higher versions are read by their first four
// fields, as the specification allows.
func parseTraceparent(v string) (traceID string, flags string, ok bool) {
	if len(v) < traceparentLen || v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return "", "", false
	}
	ver := v[:2]
	if !isLowerHex(ver) || ver == "ff" || (ver == "00" && len(v) != traceparentLen) || (len(v) > traceparentLen && v[55] != '-') {
		return "", "", false
	}
	traceID, parent, flags := v[3:35], v[36:52], v[53:55]
	if !isLowerHex(traceID) || !isLowerHex(parent) || !isLowerHex(flags) || allZero(traceID) || allZero(parent) {
		return "", "", false
	}
	return traceID, flags, true
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func allZero(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '0' {
			return false
		}
	}
	return true
}

// hop is the gateway's span of one request.
type hop struct {
	traceID, spanID, parentID string // hex; parentID "" when the gateway started the trace
	sampled                   bool
}

// propagateTrace sets out's traceparent for the hop from in. A trace the
// gateway starts is sampled when sampleNew.
func propagateTrace(in, out *http.Request, rnd *rand.Rand, sampleNew bool) hop {
	h, v := traceHop(in, out.Header, rnd, sampleNew)
	out.Header["Traceparent"] = []string{v}
	return h
}

// traceHop returns the hop from in and the traceparent to send for it;
// an invalid traceparent's tracestate is removed from out.
func traceHop(in *http.Request, out http.Header, rnd *rand.Rand, sampleNew bool) (hop, string) {
	var buf [traceparentLen]byte
	b, h, valid := appendTraceparent(buf[:0], in, rnd, sampleNew)
	if !valid {
		delete(out, "Tracestate")
	}
	v := string(b)
	h.setIDs(v)
	return h, v
}

// appendTraceparent appends to dst the traceparent to send for the hop
// from in and returns the hop without its own ids (setIDs fills them in
// from the value once it is a string: the relay makes one string of all
// the values it sets); valid is false when in's traceparent was not
// valid, whose tracestate is then not forwarded.
func appendTraceparent(dst []byte, in *http.Request, rnd *rand.Rand, sampleNew bool) (b []byte, h hop, valid bool) {
	tp := headerValue(in.Header, "Traceparent")
	traceID, flags, ok := parseTraceparent(tp)
	n := len(dst)
	b = append(dst, "00-................................-................-.."...)
	v := b[n:]
	if ok {
		h.parentID = parseTraceparentParent(tp)
		copy(v[3:35], traceID)
	} else {
		var id [16]byte
		fillRandom(id[:], rnd)
		hex.Encode(v[3:35], id[:])
		flags = "00"
		if sampleNew {
			flags = "01"
		}
	}
	var span [8]byte
	fillRandom(span[:], rnd)
	hex.Encode(v[36:52], span[:])
	copy(v[53:], flags)
	h.sampled = flags[1]&1 == 1 // the sampled bit of the last hex digit
	return b, h, ok
}

// setIDs sets the hop's trace and span id from the traceparent v it sends.
func (h *hop) setIDs(v string) { h.traceID, h.spanID = v[3:35], v[36:52] }

// Span is the gateway's part of one request's trace, handed to
// Options.OnSpan (gateway/gatewayotel exports it over OTLP).
type Span struct {
	// TraceID and SpanID, the id sent upstream as the parent; ParentID is
	// the caller's span, zero when the gateway started the trace.
	TraceID  [16]byte
	SpanID   [8]byte
	ParentID [8]byte
	Sampled  bool
	Start    time.Time
	End      time.Time
	Method   string
	Host     string
	Path     string
	Status   int
	Route    string
	Cluster  string
	Backend  string
	Attempts int
}

func (h hop) span() Span {
	var s Span
	_, _ = hex.Decode(s.TraceID[:], []byte(h.traceID))
	_, _ = hex.Decode(s.SpanID[:], []byte(h.spanID))
	if h.parentID != "" {
		_, _ = hex.Decode(s.ParentID[:], []byte(h.parentID))
	}
	s.Sampled = h.sampled
	return s
}

func fillRandom(b []byte, rnd *rand.Rand) {
	for {
		for i := 0; i < len(b); i += 8 {
			x := rnd.Uint64()
			for j := i; j < len(b) && j < i+8; j++ {
				b[j] = byte(x)
				x >>= 8
			}
		}
		for _, c := range b {
			if c != 0 {
				return
			}
		}
	}
}
