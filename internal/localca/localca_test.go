package localca_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/veerhq/veer/internal/localca"
)

func TestOpenCreatesThenReloads(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	ca, err := localca.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, localca.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if m := fi.Mode().Perm(); m != 0o600 {
		t.Fatalf("key mode %v, want 0600", m)
	}
	again, err := localca.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ca.CertPEM(), again.CertPEM()) {
		t.Fatal("second Open made another CA")
	}
	// a leaf from the first CA verifies under the second's pool
	leaf, err := ca.Issue([]string{"a.veer.test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: "a.veer.test", Roots: again.Pool()}); err != nil {
		t.Fatal(err)
	}
}

// A client trusting Pool() completes a real TLS handshake for an issued
// name and IP and refuses a name the leaf does not carry.
func TestClientVerifiesIssuedLeaf(t *testing.T) {
	ca, err := localca.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Issue([]string{"a.veer.test", "127.0.0.2"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{leaf}}
	srv.StartTLS()
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())

	cases := []struct {
		serverName string
		ok         bool
	}{
		{"a.veer.test", true},
		{"127.0.0.2", true},
		{"b.veer.test", false},
	}
	for _, c := range cases {
		conn, err := tls.Dial("tcp", "127.0.0.1:"+port, &tls.Config{RootCAs: ca.Pool(), ServerName: c.serverName})
		if c.ok != (err == nil) {
			t.Fatalf("%s: handshake err %v, want ok=%v", c.serverName, err, c.ok)
		}
		if err == nil {
			conn.Close()
		} else if !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("%s: %v, want a certificate error", c.serverName, err)
		}
	}
	// another CA's pool refuses the leaf
	other, err := localca.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: "a.veer.test", Roots: other.Pool()}); err == nil {
		t.Fatal("a leaf verified under another CA")
	}
}

func TestIssueFilesLoad(t *testing.T) {
	dir := t.TempDir()
	ca, err := localca.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	cert, key := filepath.Join(dir, "gw.crt"), filepath.Join(dir, "gw.key")
	if err := ca.IssueFiles([]string{"b.veer.test"}, cert, key); err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	l, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Verify(x509.VerifyOptions{DNSName: "b.veer.test", Roots: ca.Pool()}); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.Issue(nil); !errors.Is(err, localca.ErrNoNames) {
		t.Fatalf("Issue(nil): %v", err)
	}
}

// Corrupt or half-present files are refused with the file's name and never
// replaced.
func TestCorruptFilesNamed(t *testing.T) {
	good := t.TempDir()
	if _, err := localca.Open(good); err != nil {
		t.Fatal(err)
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(good, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	otherDir := t.TempDir()
	if _, err := localca.Open(otherDir); err != nil {
		t.Fatal(err)
	}
	otherKey, _ := os.ReadFile(filepath.Join(otherDir, localca.KeyFile))
	cases := []struct {
		name      string
		cert, key []byte // nil: file absent
		blame     string
	}{
		{"garbage cert", []byte("not pem"), read(localca.KeyFile), localca.CertFile},
		{"garbage key", read(localca.CertFile), []byte("-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n"), localca.KeyFile},
		{"key of another CA", read(localca.CertFile), otherKey, localca.KeyFile},
		{"key missing", read(localca.CertFile), nil, localca.KeyFile},
		{"cert missing", nil, read(localca.KeyFile), localca.CertFile},
		{"empty cert", []byte{}, read(localca.KeyFile), localca.CertFile},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, data := range map[string][]byte{localca.CertFile: c.cert, localca.KeyFile: c.key} {
				if data != nil {
					if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
						t.Fatal(err)
					}
				}
			}
			_, err := localca.Open(dir)
			if !errors.Is(err, localca.ErrCorrupt) {
				t.Fatalf("Open: %v, want ErrCorrupt", err)
			}
			if !strings.Contains(err.Error(), filepath.Join(dir, c.blame)) {
				t.Fatalf("error %q does not name %s", err, c.blame)
			}
			// nothing was replaced
			if c.cert != nil {
				if b, _ := os.ReadFile(filepath.Join(dir, localca.CertFile)); !bytes.Equal(b, c.cert) {
					t.Fatal("cert file rewritten")
				}
			}
		})
	}
}

func ExampleCA_Issue() {
	dir, _ := os.MkdirTemp("", "veer-ca")
	defer os.RemoveAll(dir)
	ca, err := localca.Open(dir)
	if err != nil {
		panic(err)
	}
	leaf, err := ca.Issue([]string{"a.veer.test", "127.0.0.2"})
	if err != nil {
		panic(err)
	}
	_, err = leaf.Leaf.Verify(x509.VerifyOptions{DNSName: "a.veer.test", Roots: ca.Pool()})
	fmt.Println(leaf.Leaf.DNSNames, leaf.Leaf.IPAddresses, err)
	// Output: [a.veer.test] [127.0.0.2] <nil>
}
