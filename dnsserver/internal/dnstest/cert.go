// Package dnstest holds helpers for dnsserver's tests: a throw-away
// certificate written to PEM files, as an operator would configure them.
package dnstest

import (
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"

	"github.com/veerhq/veer/lastmile/lmtest"
)

// Cert is a certificate for 127.0.0.1 and "dns.test" from a throw-away CA.
type Cert struct {
	CertFile, KeyFile string
	Pool              *x509.CertPool // trusts the CA
	TLS               tls.Certificate
}

// WriteCert issues a certificate valid for a day (lmtest's CA) and writes
// cert.pem and key.pem into dir.
func WriteCert(dir string) (*Cert, error) {
	ca, err := lmtest.NewCA()
	if err != nil {
		return nil, err
	}
	leaf, err := ca.Issue("dns.test")
	if err != nil {
		return nil, err
	}
	key, ok := leaf.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return nil, errors.New("dnstest: unexpected key type")
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	c := &Cert{CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem"), Pool: ca.Pool(), TLS: leaf}
	if err := os.WriteFile(c.CertFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Certificate[0]}), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(c.KeyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return nil, err
	}
	return c, nil
}
