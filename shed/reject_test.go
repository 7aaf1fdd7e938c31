package shed

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/veerhq/veer/outcome"
)

// TestRejectWireIsOutcomeWire: the prebuilt rejection is byte for byte what
// outcome.WriteHTTP writes, plus the ReasonHeader and Content-Length, for
// every reason and a Retry-After from the config.
func TestRejectWireIsOutcomeWire(t *testing.T) {
	s, _ := newShedder(t, Config{RetryAfter: 2500 * time.Millisecond})
	for r := Reason(0); r < numReasons; r++ {
		want := httptest.NewRecorder()
		outcome.WriteHTTP(want, outcome.Outcome{Kind: outcome.Overloaded, RetryAfter: 2500 * time.Millisecond}, r.String())
		got := httptest.NewRecorder()
		s.WriteRejection(got, reject(r))
		if got.Code != want.Code || got.Body.String() != want.Body.String() {
			t.Errorf("%v: %d %q, want %d %q", r, got.Code, got.Body, want.Code, want.Body)
		}
		for k, v := range want.Header() {
			if !slices.Equal(got.Header()[k], v) {
				t.Errorf("%v: %s = %q, want %q", r, k, got.Header()[k], v)
			}
		}
		if got.Header().Get("Retry-After") != "3" || got.Header().Get(ReasonHeader) != r.String() ||
			got.Header().Get("Content-Length") != itoa(want.Body.Len()) {
			t.Errorf("%v: headers %v", r, got.Header())
		}
	}
}

// TestRejectionClosesInsteadOfDraining: a rejected HTTP/1.1 request with a
// large or unknown-length body is answered with Connection: close (net/http
// would otherwise read up to 256 KiB of it to reuse the connection); a
// small one keeps the connection.
func TestRejectionClosesInsteadOfDraining(t *testing.T) {
	s, _ := newShedder(t, Config{})
	w := &s.pol.Load().wire[ReasonTier]
	for _, c := range []struct {
		name  string
		body  string
		clen  int64
		close bool
	}{
		{"no body", "", 0, false},
		{"small", "x", 1, false},
		{"large", strings.Repeat("x", maxDrain+1), maxDrain + 1, true},
		{"unknown length", "x", -1, true},
	} {
		var body *strings.Reader
		req := httptest.NewRequest(http.MethodPost, "/x", nil)
		if c.body != "" {
			body = strings.NewReader(c.body)
			req = httptest.NewRequest(http.MethodPost, "/x", body)
			req.ContentLength = c.clen
		}
		rec := httptest.NewRecorder()
		w.write(rec, req)
		if got := rec.Header().Get("Connection") == "close"; got != c.close {
			t.Errorf("%s: Connection: close %v, want %v", c.name, got, c.close)
		}
		if body != nil && body.Len() != len(c.body) {
			t.Errorf("%s: the rejection read the body", c.name)
		}
	}
}
