package outcome_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/veerhq/veer/outcome"
)

func FuzzParseRetryAfter(f *testing.F) {
	now := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	for _, s := range []string{"0", "120", "Sun, 29 Nov 2026 00:01:00 GMT", "", "-5", "1e9", "4294967296"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := outcome.ParseRetryAfter(v, now)
		if d < 0 {
			t.Fatalf("negative delay %v for %q", d, v)
		}
		if !ok && d != 0 {
			t.Fatalf("rejected %q but returned %v", v, d)
		}
		resp := &http.Response{StatusCode: 503, Header: http.Header{"Retry-After": {v}}}
		if o := outcome.ClassifyAt(resp, nil, now); o.RetryAfter != d {
			t.Fatalf("Classify disagrees with ParseRetryAfter for %q", v)
		}
	})
}
