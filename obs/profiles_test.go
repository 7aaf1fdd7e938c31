package obs_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/veerhq/veer/obs"
)

func TestProfiles(t *testing.T) {
	h := obs.Profiles()
	get := func(ctx context.Context, target string) *httptest.ResponseRecorder {
		t.Helper()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequestWithContext(ctx, http.MethodGet, target, nil))
		return w
	}
	gzipped := func(b []byte) bool { return bytes.HasPrefix(b, []byte{0x1f, 0x8b}) }
	ctx := t.Context()

	if w := get(ctx, "/debug/pprof/"); w.Code != 200 || !strings.Contains(w.Body.String(), "heap ") || !strings.Contains(w.Body.String(), "goroutine ") {
		t.Errorf("index: %d %q", w.Code, w.Body.String())
	}
	if w := get(ctx, "/debug/pprof/heap?gc=1"); w.Code != 200 || !gzipped(w.Body.Bytes()) {
		t.Errorf("heap: %d, %d bytes, not a gzipped profile", w.Code, w.Body.Len())
	}
	if w := get(ctx, "/debug/pprof/goroutine?debug=1"); w.Code != 200 || !strings.Contains(w.Body.String(), "TestProfiles") {
		t.Errorf("goroutine?debug=1: %d, no stack of this test in %.200q", w.Code, w.Body.String())
	}
	if w := get(ctx, "/debug/pprof/nope"); w.Code != 404 {
		t.Errorf("unknown profile: %d, want 404", w.Code)
	}
	for _, q := range []string{"0", "61", "x", "-1"} {
		if w := get(ctx, "/debug/pprof/profile?seconds="+q); w.Code != 400 || !strings.Contains(w.Body.String(), "seconds") {
			t.Errorf("seconds=%s: %d %q, want 400 naming seconds", q, w.Code, w.Body.String())
		}
	}
	// a CPU profile ends when its caller goes away, and is a profile
	done, cancel := context.WithCancel(ctx)
	cancel()
	if w := get(done, "/debug/pprof/profile?seconds=60"); w.Code != 200 || !gzipped(w.Body.Bytes()) {
		t.Errorf("CPU profile cut short: %d, %d bytes, not a gzipped profile", w.Code, w.Body.Len())
	}
}
