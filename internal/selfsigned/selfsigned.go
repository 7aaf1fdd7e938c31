// Package selfsigned gives a service that was started without a certificate
// a self-signed one for localhost and the loopback addresses, kept in its
// data directory so that it survives restarts (`veer gateway`, `veer
// control`).
//
// Contract: Files returns the same pair on every call once it exists; it
// generates a new pair only when the files are missing or do not load as a
// key pair. Both files are written with internal/atomicfile (mode 0600,
// fsynced, renamed into place), so a crash never leaves half a key.
//
// Failure mode: an error creating the directory, generating the key or
// writing a file is returned; nothing is left half written.
package selfsigned

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/veerhq/veer/internal/atomicfile"
)

// Files returns the paths dir/name.crt and dir/name.key of a self-signed
// certificate (ECDSA P-256, subject commonName, valid for validFor) for
// localhost, 127.0.0.1 and ::1, generating them when they are missing or
// unusable; created says whether it did.
func Files(dir, name, commonName string, validFor time.Duration) (certFile, keyFile string, created bool, err error) {
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if _, err := tls.LoadX509KeyPair(certFile, keyFile); err == nil {
		return certFile, keyFile, false, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", false, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", false, err
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return "", "", false, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: commonName},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(validFor),
		// Its own issuer: a client trusts it by adding it to its roots.
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", false, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", false, err
	}
	if err := atomicfile.Write(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})); err != nil {
		return "", "", false, err
	}
	if err := atomicfile.Write(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})); err != nil {
		return "", "", false, err
	}
	return certFile, keyFile, true, nil
}
