package limit

import (
	"net/http"

	"github.com/veerhq/veer/outcome"
)

// KeyFunc fills keys from an HTTP request: slot i is the request's key in
// dimension i of the config. keys has MaxDimensions slots, all "" on entry;
// an empty slot skips its dimension and slots past the config's dimensions
// are ignored. It must not retain keys.
type KeyFunc func(r *http.Request, keys []string)

// HeaderKeys returns a KeyFunc that reads dimension i's key from header
// names[i] ("" leaves the slot empty). Header values longer than 256 bytes
// are ignored, so a hostile client cannot make huge keys.
func HeaderKeys(names ...string) KeyFunc {
	return func(r *http.Request, keys []string) {
		for i, h := range names {
			if i >= len(keys) || h == "" {
				continue
			}
			if v := r.Header.Get(h); len(v) <= 256 {
				keys[i] = v
			}
		}
	}
}

// Middleware admits each request through a (a *Limiter or a remote
// limiter) with the keys that keys fills (one slot per dimension of a's
// config, in order; a knows how many it has). A rejected request gets 429
// with Retry-After via outcome.WriteHTTP, the reason naming the dimension;
// an admitted request's permit is released when the handler returns.
func Middleware(a Admitter, keys KeyFunc) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var buf [MaxDimensions]string
			ks := buf[:]
			keys(r, ks)
			res := a.Admit(r.Context(), ks)
			if !res.Allowed {
				outcome.WriteHTTP(w, res.Outcome(), res.Reason.String()+" limit of "+res.Dimension)
				return
			}
			defer res.Permit.Release()
			next.ServeHTTP(w, r)
		})
	}
}
