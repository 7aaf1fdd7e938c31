package test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestGatewayInteropHTTP3Chromium loads a page through `veer gateway` over
// HTTP/3 in headless Chromium (Debian's curl and h2load have no HTTP/3):
// Chromium is told to speak QUIC to the gateway's port
// (--origin-to-force-quic-on) and to trust the test's certificate by its
// public key's hash (--ignore-certificate-errors-spki-list; it refuses QUIC
// to an untrusted certificate even with --ignore-certificate-errors). The
// page must load with its script and image (three requests on one QUIC
// connection), the browser must report h3, and the gateway's access log
// must have logged each request as HTTP/3.0.
func TestGatewayInteropHTTP3Chromium(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium not found: run scripts/test-deps.sh (Debian package chromium)")
	}
	dir := t.TempDir()
	certFile, keyFile, spki := writeTestCert(t, dir)

	var hits atomic.Int64
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, `<!doctype html><title>h3</title><script src="/app.js"></script><img id="px" src="/px.svg" onload="document.body.dataset.img='ok'"><p id="p">page</p>`)
		case "/app.js":
			w.Header().Set("Content-Type", "text/javascript")
			io.WriteString(w, `window.appLoaded = "yes";`)
		case "/px.svg":
			w.Header().Set("Content-Type", "image/svg+xml")
			io.WriteString(w, `<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"/>`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer backend.Close()

	alog := filepath.Join(dir, "access.log")
	cfg := fmt.Sprintf(`listen: {addr: "127.0.0.1:0", plain: "", cert_file: %q, key_file: %q}
data_dir: %s
access_log: {path: %q}
routes: [{name: web, clusters: [{name: b}]}]
clusters: [{name: b, backends: [{address: %q}]}]
`, certFile, keyFile, filepath.Join(dir, "gw"), alog, strings.TrimPrefix(backend.URL, "http://"))
	if err := os.WriteFile(filepath.Join(dir, "gateway.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	gw := startVeer(t, "gateway", "--config", filepath.Join(dir, "gateway.yaml"))
	m := gw.awaitAll(t, `"tls":"([^"]+)","http3":(true|false)`)
	addr := m[1]
	if m[2] != "true" {
		t.Fatalf("veer gateway started without HTTP/3 on %s", addr)
	}

	actx, cancelA := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("enable-quic", true),
		chromedp.Flag("origin-to-force-quic-on", addr),
		chromedp.Flag("ignore-certificate-errors-spki-list", spki),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Env("TMPDIR="+t.TempDir())) // its singleton socket's dir, else left in /tmp
	defer cancelA()
	bctx, cancelB := chromedp.NewContext(actx)
	defer cancelB()
	ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate("https://"+addr+"/"), chromedp.WaitVisible(chromedp.CSS("#p"))); err != nil {
		t.Fatalf("loading https://%s/ in chromium: %v", addr, err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.body.dataset.img === "ok"`, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("the page's image did not load: %v", err)
	}
	eval := func(expr string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("evaluate %s: %v", expr, err)
		}
		return v
	}
	proto := eval(`performance.getEntriesByType("navigation")[0].nextHopProtocol`)
	app := eval(`String(window.appLoaded)`)
	img := eval(`String(document.body.dataset.img)`)
	text := eval(`document.getElementById("p").textContent`)
	if proto != "h3" || app != "yes" || img != "ok" || text != "page" {
		t.Fatalf("page through the gateway: protocol %q (want h3), script %q, image %q, text %q", proto, app, img, text)
	}

	// the access log is written by a worker: wait for the three lines
	want := map[string]bool{"/": false, "/app.js": false, "/px.svg": false}
	untilTrue(t, "the access log has the page's three requests as HTTP/3.0", func() bool {
		b, _ := os.ReadFile(alog)
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var e struct{ Path, Proto string }
			if json.Unmarshal([]byte(line), &e) == nil && e.Proto == "HTTP/3.0" {
				if _, ok := want[e.Path]; ok {
					want[e.Path] = true
				}
			}
		}
		return want["/"] && want["/app.js"] && want["/px.svg"]
	})
	if hits.Load() < 3 {
		t.Errorf("the backend saw %d requests, want at least 3", hits.Load())
	}
}

// writeTestCert writes a self-signed ECDSA certificate for 127.0.0.1 and
// localhost with its key into dir, and returns their paths and the base64
// SHA-256 of the certificate's public key (Chromium's SPKI pin form).
func writeTestCert(t *testing.T, dir string) (certFile, keyFile, spki string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "veer interop"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return certFile, keyFile, base64.StdEncoding.EncodeToString(sum[:])
}
