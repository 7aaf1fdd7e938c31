package tier_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/veerhq/veer/tier"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want tier.Tier
		err  bool
	}{
		{"critical_plus", tier.CriticalPlus, false},
		{"critical", tier.Critical, false},
		{"sheddable_plus", tier.SheddablePlus, false},
		{"sheddable-plus", tier.SheddablePlus, false},
		{"sheddable", tier.Sheddable, false},
		{"core_infrastructure", tier.CriticalPlus, false},
		{"core_flow", tier.Critical, false},
		{"user_facing", tier.SheddablePlus, false},
		{"internal", tier.Sheddable, false},
		{"CRITICAL", tier.Unset, true},
		{"", tier.Unset, true},
		{"unset", tier.Unset, true},
		{strings.Repeat("critical", 10), tier.Unset, true},
	}
	for _, tt := range tests {
		got, err := tier.Parse(tt.in)
		if got != tt.want || (err != nil) != tt.err {
			t.Errorf("Parse(%q) = %v, %v; want %v, err=%v", tt.in, got, err, tt.want, tt.err)
		}
		if err != nil && !errors.Is(err, tier.ErrUnknown) {
			t.Errorf("Parse(%q) error %v is not ErrUnknown", tt.in, err)
		}
	}
}

func TestOrderAndNames(t *testing.T) {
	for i := 1; i < len(tier.All); i++ {
		if tier.All[i] <= tier.All[i-1] {
			t.Fatalf("All is not ordered least to most critical: %v", tier.All)
		}
	}
	for _, tr := range append([]tier.Tier{tier.Unset}, tier.All[:]...) {
		b, _ := tr.MarshalText()
		var u tier.Tier = tier.Critical
		if err := u.UnmarshalText(b); err != nil || u != tr {
			t.Errorf("text round trip %v (%q): %v, %v", tr, b, u, err)
		}
	}
	for _, tr := range tier.All {
		back, err := tier.Parse(tr.String())
		if err != nil || back != tr {
			t.Errorf("round trip %v: %v, %v", tr, back, err)
		}
	}
	if tier.Unset.Or(tier.Critical) != tier.Critical || tier.Sheddable.Or(tier.Critical) != tier.Sheddable {
		t.Error("Or does not default only Unset")
	}
	if _, err := tier.Tier(9).MarshalText(); err == nil {
		t.Error("MarshalText accepted an invalid tier")
	}
}

func TestHeaderCodec(t *testing.T) {
	h := http.Header{}
	if tr, err := tier.FromHeader(h); tr != tier.Unset || err != nil {
		t.Fatalf("absent header = %v, %v", tr, err)
	}
	tier.SetHeader(h, tier.Critical, "checkout")
	if tr, err := tier.FromHeader(h); tr != tier.Critical || err != nil {
		t.Fatalf("FromHeader = %v, %v", tr, err)
	}
	if c := tier.CallerFromHeader(h); c != "checkout" {
		t.Fatalf("caller = %q", c)
	}
	h.Set(tier.Header, "bogus")
	if _, err := tier.FromHeader(h); err == nil {
		t.Fatal("bogus tier accepted")
	}
	h.Set(tier.CallerHeader, strings.Repeat("x", tier.MaxCallerLen+1))
	if c := tier.CallerFromHeader(h); c != "" {
		t.Fatal("oversized caller accepted")
	}
}

func TestMetadataCodec(t *testing.T) {
	md := map[string][]string{}
	tier.SetMetadata(md, tier.Sheddable, "batch")
	if tr, err := tier.FromMetadata(md); tr != tier.Sheddable || err != nil {
		t.Fatalf("FromMetadata = %v, %v", tr, err)
	}
	if c := tier.CallerFromMetadata(md); c != "batch" {
		t.Fatalf("caller = %q", c)
	}
	if tr, _ := tier.FromMetadata(map[string][]string{}); tr != tier.Unset {
		t.Fatal("empty metadata has a tier")
	}
}

// An inbound request's tier travels through the handler's context onto the
// outbound request to the next hop, over real HTTP.
func TestPropagationOverRealHTTP(t *testing.T) {
	type seen struct{ tier, caller string }
	got := make(chan seen, 1)
	downstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.Header.Get(tier.Header), r.Header.Get(tier.CallerHeader)}
	}))
	defer downstream.Close()

	client := &http.Client{Transport: &tier.Transport{Self: "frontend"}}
	frontend := httptest.NewServer(tier.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c := tier.CallerFromContext(r.Context()); c != "mobile-app" {
			t.Errorf("inbound caller in context = %q", c)
		}
		req, _ := http.NewRequestWithContext(r.Context(), "GET", downstream.URL, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	})))
	defer frontend.Close()

	req, _ := http.NewRequest("GET", frontend.URL, nil)
	req.Header.Set(tier.Header, "critical")
	req.Header.Set(tier.CallerHeader, "mobile-app")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	s := <-got
	if s.tier != "critical" || s.caller != "frontend" {
		t.Fatalf("downstream saw tier %q caller %q; want critical, frontend", s.tier, s.caller)
	}
}

func TestTransportDoesNotMutateRequest(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	req, _ := http.NewRequestWithContext(tier.WithTier(context.Background(), tier.Sheddable), "GET", srv.URL, nil)
	resp, err := (&tier.Transport{Self: "me"}).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(req.Header) != 0 {
		t.Fatalf("caller's request was modified: %v", req.Header)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"critical", "sheddable_plus", "core-flow", "", "\x00", "critical\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tr, err := tier.Parse(s)
		if err != nil {
			if tr != tier.Unset {
				t.Fatalf("error with tier %v", tr)
			}
			return
		}
		if !tr.Valid() {
			t.Fatalf("Parse(%q) = invalid %v without error", s, tr)
		}
		h := http.Header{}
		tier.SetHeader(h, tr, "")
		back, err := tier.FromHeader(h)
		if err != nil || back != tr {
			t.Fatalf("header round trip of %v: %v, %v", tr, back, err)
		}
	})
}

// FuzzParseHeader: the one decoder the shed middleware uses agrees with
// FromHeader and CallerFromHeader (a malformed tier is Unset), whatever
// the values, and never reads a non-canonical key.
func FuzzParseHeader(f *testing.F) {
	f.Add("critical", "gateway")
	f.Add("core-flow", "")
	f.Add("bogus", strings.Repeat("x", tier.MaxCallerLen+1))
	f.Fuzz(func(t *testing.T, crit, caller string) {
		h := http.Header{}
		h.Set(tier.Header, crit)
		h.Set(tier.CallerHeader, caller)
		want, err := tier.FromHeader(h)
		if err != nil {
			want = tier.Unset
		}
		got, c := tier.ParseHeader(h)
		if got != want || c != tier.CallerFromHeader(h) {
			t.Fatalf("tier.ParseHeader = %v, %q; want %v, %q", got, c, want, tier.CallerFromHeader(h))
		}
		if len(c) > tier.MaxCallerLen {
			t.Fatalf("caller of %d bytes", len(c))
		}
		lower := http.Header{"veer-criticality": {crit}}
		if t2, _ := tier.ParseHeader(lower); t2 != tier.Unset {
			t.Fatalf("read a non-canonical key: %v", t2)
		}
	})
}
