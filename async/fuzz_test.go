package async

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"k", `"k-1"`, "", `""`, "a b", strings.Repeat("x", 300), "\x00", `"a\"b"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		k, err := ParseKey(http.Header{"Idempotency-Key": {v}})
		if err != nil {
			return
		}
		if k == "" || len(k) > MaxKeyLength || strings.ContainsAny(k, " \t\"\\\r\n") {
			t.Fatalf("ParseKey(%q) accepted %q", v, k)
		}
		// an accepted key is accepted again, quoted or not
		if k2, err := ParseKey(http.Header{"Idempotency-Key": {`"` + k + `"`}}); err != nil || k2 != k {
			t.Fatalf("quoted %q: %q, %v", k, k2, err)
		}
	})
}

func FuzzParseID(f *testing.F) {
	for _, s := range []string{"1-0123456789abcdef", "0-0123456789abcdef", "18446744073709551615-ffffffffffffffff", "1-", "-", "01-0123456789abcdef", "1-0123456789ABCDEF"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		seq, nonce, err := ParseID(id)
		if err != nil {
			return
		}
		if FormatID(seq, nonce) != id {
			t.Fatalf("ParseID(%q) = %d, %q: does not format back", id, seq, nonce)
		}
	})
}

func FuzzPrefersAsync(f *testing.F) {
	for _, s := range []string{"respond-async", "wait=10, respond-async", "RESPOND-ASYNC; x=1", "return=minimal", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got := PrefersAsync(http.Header{"Prefer": {v}})
		want := false
		for _, p := range strings.Split(v, ",") {
			p, _, _ = strings.Cut(p, ";")
			want = want || strings.EqualFold(strings.TrimSpace(p), "respond-async")
		}
		if got != want {
			t.Fatalf("PrefersAsync(%q) = %v", v, got)
		}
	})
}

func FuzzTenantToken(f *testing.F) {
	for _, s := range []string{"", "acme", "a.b c*>", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tenant string) {
		tok := TenantToken(tenant)
		if strings.ContainsAny(tok, ". *>\t\r\n") {
			t.Fatalf("TenantToken(%q) = %q: not one subject token", tenant, tok)
		}
		if back, ok := ParseTenantToken(tok); !ok || back != tenant {
			t.Fatalf("round trip %q -> %q -> %q", tenant, tok, back)
		}
	})
}

// FuzzParseDelay: any header values give a time within [now, now+max] or
// zero, or ErrBadDelay; never a panic.
func FuzzParseDelay(f *testing.F) {
	for _, s := range []string{"30s", "90", "-1s", "2026-12-02T06:10:00Z", "", "1h1m", "99999999999"} {
		f.Add(s, "")
		f.Add("", s)
	}
	now := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, delay, notBefore string) {
		h := http.Header{}
		if delay != "" {
			h.Set(DelayHeader, delay)
		}
		if notBefore != "" {
			h.Set(NotBeforeHeader, notBefore)
		}
		at, err := ParseDelay(h, now, time.Hour)
		if err != nil {
			if !errors.Is(err, ErrBadDelay) {
				t.Fatalf("error %v is not ErrBadDelay", err)
			}
			return
		}
		if !at.IsZero() && (!at.After(now) || at.Sub(now) > time.Hour) {
			t.Fatalf("%q %q: %v outside (now, now+1h]", delay, notBefore, at)
		}
	})
}
