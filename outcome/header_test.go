package outcome_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/veerhq/veer/outcome"
)

// TestOutcomeHeaderRoundTrip: what a gateway writes with WriteHTTP, a client
// reads back with Classify, so that "nothing behind me can serve" and "I
// shed you" never look alike (issue 27, defect 3). Only a 5xx's header
// counts, and an application's own 5xx carries none.
func TestOutcomeHeaderRoundTrip(t *testing.T) {
	written := []struct {
		name        string
		o           outcome.Outcome
		status      int
		header      string
		read        outcome.Kind
		unreachable bool
	}{
		{"shed", outcome.Of(outcome.Overloaded), 503, "overloaded", outcome.Overloaded, false},
		{"limited", outcome.Outcome{Kind: outcome.Limited, RetryAfter: 3 * time.Second}, 429, "limited", outcome.Limited, false},
		{"every backend refused", outcome.Of(outcome.ConnectRefused), 502, "connect_refused", outcome.UpstreamUnavailable, true},
		{"every backend frozen", outcome.Of(outcome.ResponseTimeout), 504, "response_timeout", outcome.UpstreamUnavailable, true},
		{"no healthy cluster", outcome.Of(outcome.UpstreamUnavailable), 503, "upstream_unavailable", outcome.UpstreamUnavailable, true},
		{"bad request", outcome.Of(outcome.ClientError), 400, "client_error", outcome.ClientError, false},
	}
	for _, st := range written {
		rec := httptest.NewRecorder()
		outcome.WriteHTTP(rec, st.o, "test")
		resp := rec.Result()
		if resp.StatusCode != st.status || resp.Header.Get(outcome.HeaderOutcome) != st.header {
			t.Errorf("%s: wrote %d %s=%q, want %d %q", st.name, resp.StatusCode, outcome.HeaderOutcome, resp.Header.Get(outcome.HeaderOutcome), st.status, st.header)
		}
		o := outcome.Classify(resp, nil)
		if o.Kind != st.read || o.Kind.Unreachable() != st.unreachable || o.Status != st.status {
			t.Errorf("%s: read back %v (status %d, unreachable %v), want %v (%v)", st.name, o.Kind, o.Status, o.Kind.Unreachable(), st.read, st.unreachable)
		}
		if st.read == outcome.UpstreamUnavailable && st.status == 503 && o.RetryAfter != time.Second {
			t.Errorf("%s: Retry-After %v, want 1s", st.name, o.RetryAfter)
		}
	}
	foreign := []struct {
		name   string
		status int
		header string
		read   outcome.Kind
	}{
		{"application's own 500", 500, "", outcome.ServerError},
		{"application's own 503", 503, "", outcome.Overloaded},
		{"a 200 naming a network kind is still a success", 200, "connect_refused", outcome.Success},
		{"a 404 naming a network kind is still the client's", 404, "connect_refused", outcome.ClientError},
		{"an unknown value", 502, "gremlins", outcome.ServerError},
		{"a shed 503 relayed from a backend", 503, "overloaded", outcome.Overloaded},
	}
	for _, st := range foreign {
		resp := &http.Response{StatusCode: st.status, Header: http.Header{}}
		if st.header != "" {
			resp.Header.Set(outcome.HeaderOutcome, st.header)
		}
		if o := outcome.Classify(resp, nil); o.Kind != st.read {
			t.Errorf("%s: %v, want %v", st.name, o.Kind, st.read)
		}
	}
	for _, k := range outcome.Kinds() {
		if k.Unreachable() != (k.Network() || k == outcome.UpstreamUnavailable) {
			t.Errorf("%v: Unreachable %v", k, k.Unreachable())
		}
	}
}
