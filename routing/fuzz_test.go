package routing

import (
	"crypto/ed25519"
	"testing"
)

func FuzzVerify(f *testing.F) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	good, _ := Sign(Answer{Primary: "a.example.com", Backups: []string{"b.example.com"}, TTLSeconds: 60, Rule: "r", Version: 3}, priv)
	f.Add(good)
	f.Add([]byte(`{"answer":{},"signature":""}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, body []byte) {
		a, err := Verify(body, []ed25519.PublicKey{pub})
		if err == nil && !ValidDomain(a.Primary) {
			t.Fatalf("accepted %+v", a)
		}
	})
}

func FuzzParseState(f *testing.F) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	good, _ := Sign(Answer{Primary: "a.example.com", TTLSeconds: 60}, priv)
	f.Add([]byte(`{"version":1,"received":"2026-12-01T00:00:00Z","body":` + string(good) + `}`))
	f.Add([]byte(`{"version":2}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := parseState(raw, []ed25519.PublicKey{pub})
		if err == nil && p.answer.Primary == "" {
			t.Fatal("accepted an answer without primary")
		}
	})
}
