package routing

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"testing"
	"time"
)

func FuzzVerify(f *testing.F) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	good, _ := Sign(Answer{Primary: "a.example.com", Backups: []string{"b.example.com"}, TTLSeconds: 60, Rule: "r", Version: 3}, priv)
	f.Add(good)
	bound, _ := Sign(Answer{Primary: "a.example.com", TTLSeconds: 60}.Bind("d", time.Unix(1e9, 0)), priv)
	f.Add(bound)
	f.Add([]byte(`{"answer":{},"signature":""}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, body []byte) {
		a, err := Verify(body, []ed25519.PublicKey{pub})
		if err == nil && !ValidDomain(a.Primary) {
			t.Fatalf("accepted %+v", a)
		}
		if err != nil {
			return
		}
		// A verified answer passes Check only bound, for its device, in time.
		if a.Check("d", time.Unix(1e9, 0)) == nil && (a.DeviceSHA256 != DeviceHash("d") || a.ExpiresAt < a.IssuedAt || time.Unix(a.ExpiresAt, 0).Add(MaxClockSkew).Before(time.Unix(1e9, 0))) {
			t.Fatalf("Check passed %+v", a)
		}
	})
}

func FuzzParseState(f *testing.F) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	good, _ := Sign(Answer{Primary: "a.example.com", TTLSeconds: 60}.Bind("d", time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)), priv)
	f.Add([]byte(`{"version":1,"received":"2026-12-01T00:00:00Z","body":` + string(good) + `}`))
	f.Add([]byte(`{"version":2}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := parseState(raw, []ed25519.PublicKey{pub})
		if err == nil && p.answer.Primary == "" {
			t.Fatal("accepted an answer without primary")
		}
	})
}

// FuzzAppendSigned: the service's fast encoder writes what Sign writes for
// the bound answer, and it verifies for its device at its issue time.
func FuzzAppendSigned(f *testing.F) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	f.Add("region:east", "d-1", 3600, int64(1e9), int64(42))
	f.Add("<&>\u2028\"", "", 0, int64(0), int64(-1))
	f.Fuzz(func(t *testing.T, rule, device string, ttl int, now, version int64) {
		if now <= 0 {
			return // before 1970: issued_at 0 is omitted by Sign (omitempty); no clock says that
		}
		a := Answer{Primary: "a.example.com", Backups: []string{"b.example.com"}, TTLSeconds: ttl, Rule: rule, Version: version}
		at := time.Unix(now, 0)
		got := Prepare(a).AppendSigned(nil, priv, KeyID(pub), device, at)
		if ttl < 0 || ttl > MaxTTLSeconds {
			return // the service validates ttl_seconds; no such answer is signed
		}
		want, err := Sign(a.Bind(device, at), priv)
		if err != nil || !bytes.Equal(got, append(want, '\n')) {
			t.Fatalf("%+v %q %d:\n got %s\nwant %s (%v)", a, device, now, got, want, err)
		}
		v, err := VerifyFor(got, []ed25519.PublicKey{pub}, device, at)
		if err != nil && !errors.Is(err, ErrExpired) {
			t.Fatalf("%+v: %v", a, err)
		}
		if err == nil && v.DeviceSHA256 != DeviceHash(device) {
			t.Fatalf("%+v", v)
		}
	})
}
