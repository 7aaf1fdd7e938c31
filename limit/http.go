package limit

import (
	"context"
	"net/http"

	"github.com/veerhq/veer/outcome"
	"github.com/veerhq/veer/tier"
)

// KeyFunc fills keys from an HTTP request: slot i is the request's key in
// dimension i of the config. keys has MaxDimensions slots, all "" on entry;
// an empty slot skips its dimension and slots past the config's dimensions
// are ignored. It must not retain keys.
type KeyFunc func(r *http.Request, keys []string)

// HeaderKeys returns a KeyFunc that reads dimension i's key from header
// names[i] ("" leaves the slot empty). AdmitHTTP bounds what it reads (see
// MaxKeyLen).
func HeaderKeys(names ...string) KeyFunc {
	return func(r *http.Request, keys []string) {
		for i, h := range names {
			if i >= len(keys) || h == "" {
				continue
			}
			keys[i] = r.Header.Get(h)
		}
	}
}

// MaxKeyLen bounds a key taken from a request. AdmitHTTP replaces a longer
// key by OverlongKey, so that such requests share one key: a hostile client
// can neither make huge keys nor step out of its dimension by sending one.
const MaxKeyLen = 256

// OverlongKey stands for every key longer than MaxKeyLen.
const OverlongKey = "\x00overlong"

// AdmitHTTP is Middleware's admission of one request, for a handler that
// fills the keys itself (the gateway): keys (one slot per dimension of a's
// config; an empty slot skips its dimension) are bounded by MaxKeyLen, then
// admitted through a. Refused, it has written 429 with Retry-After to w
// through outcome.WriteHTTP, the reason naming the limit and dimension
// ("rate limit of tenant"), and returns ok false. Admitted, the caller must
// Release the returned Result's Permit when the request is done.
//
// The tier a rejection is counted under (veer_limit_rejected_total{tier})
// is the one r's context carries (tier.FromContext); AdmitHTTPAs names it.
func AdmitHTTP(a Admitter, w http.ResponseWriter, r *http.Request, keys []string) (res Result, ok bool) {
	return admitHTTP(r.Context(), a, w, r, keys)
}

// AdmitHTTPAs is AdmitHTTP for a request whose tier the caller has resolved
// before the request carries it (the gateway: the stated tier, or its
// criticality table's, before shedding): a rejection is counted under t.
// A *Limiter admits it without allocating (Limiter.AdmitAs); another
// Admitter gets t in a context value.
func AdmitHTTPAs(a Admitter, w http.ResponseWriter, r *http.Request, keys []string, t tier.Tier) (res Result, ok bool) {
	if t == tier.Unset || tier.FromContext(r.Context()) == t {
		return admitHTTP(r.Context(), a, w, r, keys)
	}
	if l, isLocal := a.(*Limiter); isLocal {
		boundKeys(keys)
		return finishHTTP(l.AdmitAs(keys, t), w)
	}
	return admitHTTP(tier.WithTier(r.Context(), t), a, w, r, keys)
}

func admitHTTP(ctx context.Context, a Admitter, w http.ResponseWriter, r *http.Request, keys []string) (res Result, ok bool) {
	boundKeys(keys)
	return finishHTTP(a.Admit(ctx, keys), w)
}

// boundKeys replaces the keys longer than MaxKeyLen by OverlongKey.
func boundKeys(keys []string) {
	for i, k := range keys {
		if len(k) > MaxKeyLen {
			keys[i] = OverlongKey
		}
	}
}

// finishHTTP writes a refusal (429 with Retry-After) for res.
func finishHTTP(res Result, w http.ResponseWriter) (Result, bool) {
	if !res.Allowed {
		outcome.WriteHTTP(w, res.Outcome(), res.Reason.String()+" limit of "+res.Dimension)
		return res, false
	}
	return res, true
}

// Middleware admits each request through a (a *Limiter or a remote
// limiter) with the keys that keys fills (one slot per dimension of a's
// config, in order; a knows how many it has), by AdmitHTTP. A rejected
// request gets 429 with Retry-After via outcome.WriteHTTP, the reason
// naming the dimension; an admitted request's permit is released when the
// handler returns.
func Middleware(a Admitter, keys KeyFunc) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var buf [MaxDimensions]string
			ks := buf[:]
			keys(r, ks)
			res, ok := AdmitHTTP(a, w, r, ks)
			if !ok {
				return
			}
			defer res.Permit.Release()
			next.ServeHTTP(w, r)
		})
	}
}
