package control

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/veerhq/veer/internal/selfsigned"
)

// loadOrCreateSigningKey reads the PKCS#8 PEM Ed25519 key at path, or
// generates one (mode 0600) when the file does not exist. A file that
// exists but is not such a key is an error, never replaced.
func loadOrCreateSigningKey(path string) (ed25519.PrivateKey, bool, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, false, err
		}
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			return nil, false, err
		}
		if err := writeNew(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})); err != nil {
			return nil, false, err
		}
		return k, true, nil
	}
	if err != nil {
		return nil, false, err
	}
	b, _ := pem.Decode(raw)
	if b == nil {
		return nil, false, fmt.Errorf("control: signing key %s: not PEM", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, false, fmt.Errorf("control: signing key %s: %w", path, err)
	}
	ek, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, false, fmt.Errorf("control: signing key %s: not Ed25519", path)
	}
	return ek, false, nil
}

// PublicKeyString is the standard-base64 form routing.Config.PublicKeys
// takes.
func PublicKeyString(k ed25519.PublicKey) string { return base64.StdEncoding.EncodeToString(k) }

// loadOrCreateAdminToken returns the admin token in path, generating one
// (mode 0600) on first start.
func loadOrCreateAdminToken(path string) (string, bool, error) {
	raw, err := os.ReadFile(path)
	if err == nil {
		tok := strings.TrimSpace(string(raw))
		if len(tok) < 16 {
			return "", false, fmt.Errorf("control: admin token file %s: token shorter than 16 characters", path)
		}
		return tok, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", false, err
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", false, err
	}
	tok := base64.RawURLEncoding.EncodeToString(b)
	if err := writeNew(path, []byte(tok+"\n")); err != nil {
		return "", false, err
	}
	return tok, true, nil
}

// writeNew creates path with mode 0600, failing if it exists.
func writeNew(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// selfSigned loads or creates a self-signed certificate in dir for
// localhost and the loopback addresses.
func selfSigned(dir string) (tls.Certificate, error) {
	cert, key, _, err := selfsigned.Files(dir, "tls", "veer control", 10*365*24*time.Hour)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.LoadX509KeyPair(cert, key)
}
