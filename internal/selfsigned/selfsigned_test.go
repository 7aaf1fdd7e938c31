package selfsigned_test

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/veerhq/veer/internal/selfsigned"
)

// The pair is generated once, kept across calls, trusted by a client that
// adds it to its roots for localhost and 127.0.0.1, and replaced when the
// files no longer load.
func TestFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	cert, key, created, err := selfsigned.Files(dir, "tls", "veer test", time.Hour)
	if err != nil || !created {
		t.Fatalf("first call: created %v, err %v", created, err)
	}
	if fi, err := os.Stat(key); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: %v, %v", fi, err)
	}
	first, _ := os.ReadFile(cert)
	if _, _, created, err := selfsigned.Files(dir, "tls", "veer test", time.Hour); err != nil || created {
		t.Fatalf("second call: created %v, err %v", created, err)
	}
	if again, _ := os.ReadFile(cert); string(again) != string(first) {
		t.Fatal("second call replaced a usable certificate")
	}

	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(leaf)
	for _, name := range []string{"localhost", "127.0.0.1"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: name}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if d := time.Until(leaf.NotAfter); d > time.Hour || d < 50*time.Minute {
		t.Errorf("valid for %v more, want about an hour", d)
	}

	if err := os.WriteFile(key, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, created, err := selfsigned.Files(dir, "tls", "veer test", time.Hour); err != nil || !created {
		t.Fatalf("after a broken key: created %v, err %v", created, err)
	}
	if _, err := tls.LoadX509KeyPair(cert, key); err != nil {
		t.Fatalf("replacement does not load: %v", err)
	}
}
