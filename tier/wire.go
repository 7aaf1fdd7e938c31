package tier

import (
	"context"
	"net/http"
)

// Header and metadata names.
const (
	// Header carries the request's tier, e.g. "Veer-Criticality: critical".
	Header = "Veer-Criticality"
	// CallerHeader names the calling service, e.g. "Rpc-Caller: checkout".
	CallerHeader = "Rpc-Caller"
	// MetadataKey and CallerMetadataKey are the gRPC metadata keys (gRPC
	// metadata keys are lower case).
	MetadataKey       = "veer-criticality"
	CallerMetadataKey = "rpc-caller"
)

// MaxCallerLen bounds a caller name read from the wire; longer names are
// ignored so a hostile client cannot grow tables or logs without limit.
const MaxCallerLen = 128

type ctxKey struct{}
type callerKey struct{}

// WithTier returns a context carrying t.
func WithTier(ctx context.Context, t Tier) context.Context {
	return context.WithValue(ctx, ctxKey{}, t)
}

// FromContext returns the tier carried by ctx, or Unset.
func FromContext(ctx context.Context) Tier {
	t, _ := ctx.Value(ctxKey{}).(Tier)
	return t
}

// WithCaller returns a context carrying the caller's service name.
func WithCaller(ctx context.Context, caller string) context.Context {
	return context.WithValue(ctx, callerKey{}, caller)
}

// CallerFromContext returns the caller carried by ctx, or "".
func CallerFromContext(ctx context.Context) string {
	c, _ := ctx.Value(callerKey{}).(string)
	return c
}

// The decoders read the header map with the canonical keys directly:
// net/http stores inbound keys canonicalised, and Header and CallerHeader
// are canonical, so Header.Get's re-canonicalisation of the key on every
// call (a third of a shedding middleware's unloaded path) buys nothing.

// FromHeader decodes the tier of an inbound HTTP request. It returns Unset
// and nil when the header is absent, and an error when it names no tier.
func FromHeader(h http.Header) (Tier, error) {
	v := first(h, Header)
	if v == "" {
		return Unset, nil
	}
	return Parse(v)
}

// CallerFromHeader returns the Rpc-Caller of an inbound HTTP request, or ""
// when absent or longer than MaxCallerLen.
func CallerFromHeader(h http.Header) string {
	return boundCaller(first(h, CallerHeader))
}

// ParseHeader decodes both at once, as a server that acts on them does: the
// stated tier (Unset when absent or malformed: the receiving policy decides
// the default) and the caller ("" when absent or longer than MaxCallerLen).
// It allocates nothing.
func ParseHeader(h http.Header) (Tier, string) {
	t := Unset
	if v := first(h, Header); v != "" {
		t, _ = Parse(v)
	}
	return t, CallerFromHeader(h)
}

func first(h http.Header, canonicalKey string) string {
	if v := h[canonicalKey]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// SetHeader writes t and caller onto outbound headers. Unset and "" are
// not written.
func SetHeader(h http.Header, t Tier, caller string) {
	if t.Valid() {
		h.Set(Header, t.String())
	}
	if caller != "" {
		h.Set(CallerHeader, caller)
	}
}

// FromMetadata decodes the tier from gRPC metadata. md is a
// google.golang.org/grpc/metadata.MD (whose underlying type is
// map[string][]string), passed without conversion.
func FromMetadata(md map[string][]string) (Tier, error) {
	vs := md[MetadataKey]
	if len(vs) == 0 || vs[0] == "" {
		return Unset, nil
	}
	return Parse(vs[0])
}

// CallerFromMetadata returns the rpc-caller of gRPC metadata, or "".
func CallerFromMetadata(md map[string][]string) string {
	vs := md[CallerMetadataKey]
	if len(vs) == 0 {
		return ""
	}
	return boundCaller(vs[0])
}

// SetMetadata writes t and caller into gRPC metadata.
func SetMetadata(md map[string][]string, t Tier, caller string) {
	if t.Valid() {
		md[MetadataKey] = []string{t.String()}
	}
	if caller != "" {
		md[CallerMetadataKey] = []string{caller}
	}
}

func boundCaller(c string) string {
	if len(c) > MaxCallerLen {
		return ""
	}
	return c
}

// Inbound returns ctx enriched with the tier and caller of an inbound HTTP
// request. A malformed tier is dropped (Unset), as the receiving policy
// decides the default; callers that must reject it use FromHeader.
func Inbound(ctx context.Context, h http.Header) context.Context {
	if t, err := FromHeader(h); err == nil && t != Unset {
		ctx = WithTier(ctx, t)
	}
	if c := CallerFromHeader(h); c != "" {
		ctx = WithCaller(ctx, c)
	}
	return ctx
}

// Middleware copies an inbound request's tier and caller into its context,
// so that Transport can propagate them on outbound calls made with it.
func Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if first(r.Header, Header) != "" || first(r.Header, CallerHeader) != "" {
			r = r.WithContext(Inbound(r.Context(), r.Header))
		}
		next.ServeHTTP(w, r)
	})
}

// Transport propagates the tier of each outbound request's context onto
// its headers. Self, when not empty, is sent as Rpc-Caller (this service is
// the caller of the next hop). Headers already set on the request win.
type Transport struct {
	Next http.RoundTripper // nil: http.DefaultTransport
	Self string
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	next := t.Next
	if next == nil {
		next = http.DefaultTransport
	}
	tr := FromContext(r.Context())
	setTier := tr.Valid() && r.Header.Get(Header) == ""
	setCaller := t.Self != "" && r.Header.Get(CallerHeader) == ""
	if setTier || setCaller {
		r = r.Clone(r.Context()) // RoundTrippers must not modify the request
		if setTier {
			r.Header.Set(Header, tr.String())
		}
		if setCaller {
			r.Header.Set(CallerHeader, t.Self)
		}
	}
	return next.RoundTrip(r)
}

var _ http.RoundTripper = (*Transport)(nil)
