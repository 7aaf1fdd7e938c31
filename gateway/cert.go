package gateway

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/veerhq/veer/internal/selfsigned"
)

// certCheckEvery bounds how often the certificate files are looked at.
const certCheckEvery = time.Second

// certStore serves the listener certificate and reloads it when its files
// change (checked at most once per second, on handshakes). A file that
// fails to load keeps the previous certificate, logged.
type certStore struct {
	certFile, keyFile string
	log               *slog.Logger
	every             time.Duration // certCheckEvery; tests set 0

	mu      sync.Mutex
	cert    *tls.Certificate
	modTime time.Time
	checked time.Time
}

func newCertStore(certFile, keyFile string, log *slog.Logger) (*certStore, error) {
	s := &certStore{certFile: certFile, keyFile: keyFile, log: log, every: certCheckEvery}
	if err := s.load(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *certStore) load() error {
	fi, err := os.Stat(s.certFile)
	if err != nil {
		return err
	}
	c, err := tls.LoadX509KeyPair(s.certFile, s.keyFile)
	if err != nil {
		return err
	}
	s.cert, s.modTime = &c, fi.ModTime()
	return nil
}

func (s *certStore) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now := time.Now(); now.Sub(s.checked) >= s.every {
		s.checked = now
		kfi, kerr := os.Stat(s.keyFile)
		if fi, err := os.Stat(s.certFile); err == nil && kerr == nil && (!fi.ModTime().Equal(s.modTime) || kfi.ModTime().After(s.modTime)) {
			prev := s.modTime
			if err := s.load(); err != nil {
				s.modTime = prev
				s.log.Error("certificate reload failed; keeping the previous one", "cert_file", s.certFile, "err", err)
			} else {
				s.log.Info("certificate reloaded", "cert_file", s.certFile)
			}
		}
	}
	return s.cert, nil
}

// selfSigned returns the paths of a self-signed certificate for localhost
// in dir, generating it on first use, and says so in the log.
func selfSigned(dir string, log *slog.Logger) (certFile, keyFile string, err error) {
	certFile, keyFile, created, err := selfsigned.Files(dir, "selfsigned", "veer gateway self-signed", 365*24*time.Hour)
	if err != nil {
		return "", "", fmt.Errorf("data_dir: %w", err)
	}
	if created {
		log.Warn("no certificate configured: generated a self-signed one in the data dir (clients will not trust it)", "cert_file", certFile)
	} else {
		log.Warn("no certificate configured: using the self-signed one in the data dir", "cert_file", certFile)
	}
	return certFile, keyFile, nil
}
