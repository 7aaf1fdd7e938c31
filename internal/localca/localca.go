// Package localca is the one local certificate authority of a veer system
// on one machine or a private network (`veer up`): a CA key pair kept in a
// data directory, and leaf certificates issued from it for the names the
// configuration gives (access domains, the routing service's domain, IP
// addresses), so that the client SDK, which checks the domain name, can
// trust every gateway, the control plane and the DNS's DoH/DoT listeners
// through one root (lastmile.Options.RootCAs = ca.Pool()).
//
// Contract: Open(dir) loads dir/ca.pem and dir/ca-key.pem, or creates both
// (ECDSA P-256, key file mode 0600, written atomically) when neither exists.
// The same directory gives the same CA on every Open, so leaves issued by an
// earlier run stay valid. Issue signs a fresh leaf (ECDSA P-256) for DNS
// names and IP literals, valid for LeafValidity; it never touches the disk.
//
// Failure mode: a file that exists but does not parse (not PEM, a key that
// is not the certificate's, a certificate that is not a CA) is an error
// naming the file (ErrCorrupt); Open never replaces it, so a CA that
// clients already trust is not silently rotated. Only one of the two files
// present is an error too.
package localca

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/veerhq/veer/internal/atomicfile"
)

const (
	// CertFile and KeyFile are the CA's file names in its directory.
	CertFile = "ca.pem"
	KeyFile  = "ca-key.pem"
	// CAValidity is how long a created CA is valid.
	CAValidity = 10 * 365 * 24 * time.Hour
	// LeafValidity is how long an issued leaf is valid.
	LeafValidity = 90 * 24 * time.Hour
)

var (
	// ErrCorrupt: a CA file exists but cannot be used; the error names it.
	ErrCorrupt = errors.New("localca: unusable CA file")
	// ErrNoNames: Issue was given no names.
	ErrNoNames = errors.New("localca: no names to issue for")
)

// CA is a loaded certificate authority. Its methods are safe for concurrent
// use.
type CA struct {
	cert    *x509.Certificate
	certPEM []byte
	key     crypto.Signer
	pool    *x509.CertPool
}

// Open loads the CA in dir, creating dir and the CA when neither file
// exists.
func Open(dir string) (*CA, error) {
	certPath, keyPath := filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile)
	certPEM, cerr := os.ReadFile(certPath)
	keyPEM, kerr := os.ReadFile(keyPath)
	switch {
	case errors.Is(cerr, fs.ErrNotExist) && errors.Is(kerr, fs.ErrNotExist):
		return create(dir, certPath, keyPath)
	case cerr != nil && !errors.Is(cerr, fs.ErrNotExist):
		return nil, cerr
	case kerr != nil && !errors.Is(kerr, fs.ErrNotExist):
		return nil, kerr
	case cerr != nil:
		return nil, fmt.Errorf("%w: %s: missing beside %s", ErrCorrupt, certPath, keyPath)
	case kerr != nil:
		return nil, fmt.Errorf("%w: %s: missing beside %s", ErrCorrupt, keyPath, certPath)
	}
	return parse(certPath, certPEM, keyPath, keyPEM)
}

func parse(certPath string, certPEM []byte, keyPath string, keyPEM []byte) (*CA, error) {
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%w: %s: no PEM CERTIFICATE block", ErrCorrupt, certPath)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, certPath, err)
	}
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("%w: %s: not a CA certificate", ErrCorrupt, certPath)
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, fmt.Errorf("%w: %s: no PEM key block", ErrCorrupt, keyPath)
	}
	var key crypto.Signer
	switch kb.Type {
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(kb.Bytes)
	case "PRIVATE KEY":
		var k any
		if k, err = x509.ParsePKCS8PrivateKey(kb.Bytes); err == nil {
			var ok bool
			if key, ok = k.(crypto.Signer); !ok {
				err = errors.New("not a signing key")
			}
		}
	default:
		err = fmt.Errorf("PEM block %q, want EC PRIVATE KEY or PRIVATE KEY", kb.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, keyPath, err)
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return nil, fmt.Errorf("%w: %s: does not match %s: %v", ErrCorrupt, keyPath, certPath, err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{cert: cert, certPEM: pem.EncodeToMemory(cb), key: key, pool: pool}, nil
}

func create(dir, certPath, keyPath string) (*CA, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "veer local CA", Organization: []string{"veer"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(CAValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	// The key first: a crash between the two leaves a key without a
	// certificate, which Open reports instead of minting a second CA.
	if err := atomicfile.Write(keyPath, keyPEM); err != nil {
		return nil, err
	}
	if err := atomicfile.Write(certPath, certPEM); err != nil {
		return nil, err
	}
	return parse(certPath, certPEM, keyPath, keyPEM)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return n.Add(n, big.NewInt(1))
}

// Issue signs a leaf certificate for names: DNS names ("a.veer.test",
// "*.veer.test") and IP literals ("127.0.0.2", "::1"). The first name is the
// subject's common name.
func (ca *CA) Issue(names []string) (tls.Certificate, error) {
	if len(names) == 0 {
		return tls.Certificate{}, ErrNoNames
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: names[0]},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(LeafValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der, ca.cert.Raw}, PrivateKey: key, Leaf: leaf}, nil
}

// IssueFiles issues a leaf for names and writes it to certPath (the leaf
// followed by the CA, PEM) and keyPath (mode 0600), for services that read
// their certificate from files (`veer gateway`'s listen.cert_file, `veer
// control`'s cert_file).
func (ca *CA) IssueFiles(names []string, certPath, keyPath string) error {
	c, err := ca.Issue(names)
	if err != nil {
		return err
	}
	kder, err := x509.MarshalECPrivateKey(c.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		return err
	}
	var chain []byte
	for _, der := range c.Certificate {
		chain = append(chain, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	if err := atomicfile.Write(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})); err != nil {
		return err
	}
	return atomicfile.Write(certPath, chain)
}

// Pool is a certificate pool holding only this CA, for a client's RootCAs.
// Callers must not modify it.
func (ca *CA) Pool() *x509.CertPool { return ca.pool }

// CertPEM is the CA certificate, PEM encoded (what a client installs).
func (ca *CA) CertPEM() []byte { return append([]byte(nil), ca.certPEM...) }

// Certificate is the CA certificate.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }
