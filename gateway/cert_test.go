package gateway

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/veerhq/veer/obs"
)

// A certificate replaced on disk is served from the next handshake; a
// broken replacement keeps the previous one.
func TestCertReload(t *testing.T) {
	dir := t.TempDir()
	genA, genB := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	certA, keyA, err := selfSigned(genA, obs.Discard)
	if err != nil {
		t.Fatal(err)
	}
	certB, keyB, err := selfSigned(genB, obs.Discard)
	if err != nil {
		t.Fatal(err)
	}
	live, liveKey := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	install := func(cert, key string, at time.Time) {
		for src, dst := range map[string]string{cert: live, key: liveKey} {
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, b, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(dst, at, at); err != nil {
				t.Fatal(err)
			}
		}
	}
	serial := func(s *certStore) string {
		c, err := s.get(nil)
		if err != nil {
			t.Fatal(err)
		}
		x, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return x.SerialNumber.String()
	}
	t0 := time.Now().Add(-time.Hour)
	install(certA, keyA, t0)
	s, err := newCertStore(live, liveKey, obs.Discard)
	if err != nil {
		t.Fatal(err)
	}
	s.every = 0
	a := serial(s)
	install(certB, keyB, t0.Add(time.Minute))
	b := serial(s)
	if b == a {
		t.Fatal("replaced certificate not reloaded")
	}
	if err := os.WriteFile(live, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = os.Chtimes(live, t0.Add(2*time.Minute), t0.Add(2*time.Minute))
	if got := serial(s); got != b {
		t.Fatalf("broken file: serving %s, want the previous certificate %s", got, b)
	}
	// selfSigned reuses the certificate it generated
	again, _, err := selfSigned(genA, obs.Discard)
	if err != nil || again != certA {
		t.Fatalf("self-signed regenerated: %v %v", again, err)
	}
}
