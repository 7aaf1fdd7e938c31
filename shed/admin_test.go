package shed

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/veerhq/veer/tier"
)

func TestAdminHandler(t *testing.T) {
	var logs bytes.Buffer
	s, _ := newShedder(t, Config{
		Logger:    slog.New(slog.NewTextHandler(&logs, nil)),
		Endpoints: []EndpointConfig{{Name: "GET /trips", Callers: map[string]tier.Tier{"batch": tier.Sheddable}}},
	})
	srv := httptest.NewServer(s.AdminHandler("s3cret"))
	defer srv.Close()
	ro := httptest.NewServer(s.AdminHandler(""))
	defer ro.Close()

	post := func(url, token, body string) int {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		req.Header.Set(AdminUserHeader, "alice")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	change := `{"endpoint":"GET /trips","caller":"batch","tier":"critical"}`
	steps := []struct {
		url, token, body string
		want             int
		wantTier         tier.Tier
	}{
		{ro.URL, "s3cret", change, http.StatusForbidden, tier.Sheddable}, // no token configured: read-only
		{srv.URL, "", change, http.StatusUnauthorized, tier.Sheddable},
		{srv.URL, "wrong", change, http.StatusUnauthorized, tier.Sheddable},
		{srv.URL, "s3cret", `{"endpoint":"GET /trips","caller":"batch","tier":"gold"}`, http.StatusBadRequest, tier.Sheddable},
		{srv.URL, "s3cret", change, http.StatusOK, tier.Critical},
		{srv.URL, "s3cret", `{"endpoint":"GET /trips","caller":"batch","tier":""}`, http.StatusOK, tier.Sheddable}, // removed: file value again
	}
	for i, st := range steps {
		if got := post(st.url, st.token, st.body); got != st.want {
			t.Fatalf("step %d: status %d, want %d", i, got, st.want)
		}
		if got := s.Resolve("GET /trips", "batch", tier.Unset); got != st.wantTier {
			t.Fatalf("step %d: batch is %v, want %v", i, got, st.wantTier)
		}
	}
	if !strings.Contains(logs.String(), "who=alice@") || !strings.Contains(logs.String(), "to=critical") {
		t.Fatalf("change not logged with who and what:\n%s", logs.String())
	}

	post(srv.URL, "s3cret", `{"endpoint":"GET /new","caller":"web","tier":"critical_plus"}`)
	resp, err := ro.Client().Get(ro.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v AdminView
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	want := []TableEntry{
		{"GET /new", "web", "critical_plus", "admin"},
		{"GET /trips", "batch", "sheddable", "file"},
	}
	if v.Writable || len(v.Table) != 2 || v.Table[0] != want[0] || v.Table[1] != want[1] || v.DefaultTier != "sheddable_plus" {
		t.Fatalf("view %+v, want table %+v, read-only", v, want)
	}
}

func TestParseChange(t *testing.T) {
	tests := []struct {
		body string
		ok   bool
		tier tier.Tier
	}{
		{`{"endpoint":"e","caller":"c","tier":"critical"}`, true, tier.Critical},
		{`{"endpoint":"e","caller":"c","tier":""}`, true, tier.Unset},
		{`{"endpoint":"e","caller":"c"}`, true, tier.Unset},
		{`{"endpoint":"","caller":"c","tier":"critical"}`, false, 0},
		{`{"endpoint":"e","caller":"","tier":"critical"}`, false, 0},
		{`{"endpoint":"e","caller":"c","tier":"critical","x":1}`, false, 0},
		{`{"endpoint":"e","caller":"c","tier":"critical"} {}`, false, 0},
		{`[]`, false, 0},
		{`{"endpoint":"e","caller":"` + strings.Repeat("c", 200) + `"}`, false, 0},
	}
	for _, tt := range tests {
		_, got, err := ParseChange([]byte(tt.body))
		if (err == nil) != tt.ok || got != tt.tier {
			t.Errorf("ParseChange(%s) = %v, %v; want ok=%v tier %v", tt.body, got, err, tt.ok, tt.tier)
		}
	}
}

func FuzzParseChange(f *testing.F) {
	f.Add([]byte(`{"endpoint":"GET /trips","caller":"batch","tier":"critical"}`))
	f.Add([]byte(`{"endpoint":"e","caller":"c","tier":""}`))
	f.Add([]byte(`{"endpoint":1}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		c, tr, err := ParseChange(body)
		if err != nil {
			return
		}
		if c.Endpoint == "" || len(c.Endpoint) > MaxEndpointLen || c.Caller == "" || len(c.Caller) > tier.MaxCallerLen {
			t.Fatalf("accepted out-of-bounds change %+v", c)
		}
		if c.Tier != "" && !tr.Valid() || c.Tier == "" && tr != tier.Unset {
			t.Fatalf("change %+v decoded to tier %v", c, tr)
		}
		// Round trip: what was accepted re-encodes to an equal change.
		b, _ := json.Marshal(c)
		c2, tr2, err := ParseChange(b)
		if err != nil || c2 != c || tr2 != tr {
			t.Fatalf("round trip of %+v: %+v %v %v", c, c2, tr2, err)
		}
	})
}

// FuzzTierHeaders feeds arbitrary Veer-Criticality and Rpc-Caller values
// through the middleware's decoding: the resolved tier is always one of the
// four, and an untrusted caller never gets the tier it stated.
func FuzzTierHeaders(f *testing.F) {
	f.Add("critical", "gateway")
	f.Add("critical-plus", "evil")
	f.Add("", strings.Repeat("x", 200))
	f.Add("\x00", "")
	s, _ := newShedder(f, Config{TrustedCallers: []string{"gateway"}, DefaultTier: tier.Sheddable})
	f.Fuzz(func(t *testing.T, crit, caller string) {
		h := http.Header{}
		h.Set(tier.Header, crit)
		h.Set(tier.CallerHeader, caller)
		stated, _ := tier.FromHeader(h)
		st2, c2 := tier.ParseHeader(h)
		if c2 != tier.CallerFromHeader(h) || st2 != stated {
			t.Fatalf("ParseHeader = %v, %q; FromHeader, CallerFromHeader %v, %q", st2, c2, stated, tier.CallerFromHeader(h))
		}
		got := s.Resolve("e", tier.CallerFromHeader(h), stated)
		if !got.Valid() {
			t.Fatalf("resolved %v", got)
		}
		if tier.CallerFromHeader(h) != "gateway" && got != tier.Sheddable {
			t.Fatalf("untrusted caller %q stating %q got %v", caller, crit, got)
		}
	})
}
