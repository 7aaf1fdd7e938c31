package doh_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"io"
	"net/http"
	"net/netip"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/quic-go/quic-go/http3"
	"go.uber.org/goleak"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/dnsserver"
	"github.com/veerhq/veer/dnsserver/doh"
	"github.com/veerhq/veer/dnsserver/internal/dnstest"
	"github.com/veerhq/veer/lastmile"
	"github.com/veerhq/veer/obs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const zone = `
listen: 127.0.0.1:0
zones:
  - origin: example.test.
    records:
      - "www 60 A 192.0.2.10"
      - "www 60 AAAA 2001:db8::10"
`

type env struct {
	dns  *dnsserver.Server
	doh  *doh.Server
	cert *dnstest.Cert
}

func start(t *testing.T) *env {
	t.Helper()
	var cfg dnsserver.Config
	if err := config.Parse([]byte(zone), "zone.yaml", &cfg); err != nil {
		t.Fatal(err)
	}
	cert, err := dnstest.WriteCert(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg.DoHListen = "127.0.0.1:0"
	cfg.TLS = dnsserver.TLSConfig{Cert: cert.CertFile, Key: cert.KeyFile}
	d, err := dnsserver.New(cfg, dnsserver.Options{Registerer: prometheus.NewRegistry(), Logger: obs.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	h, err := doh.New(doh.ConfigFrom(d.Config()), d, doh.Options{Logger: obs.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return &env{dns: d, doh: h, cert: cert}
}

func query(t *testing.T, name string, qtype uint16) []byte {
	q := new(dns.Msg)
	q.SetQuestion(name, qtype)
	q.Id = 0
	wire, err := q.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return wire
}

func get(t *testing.T, c *http.Client, u string) *http.Response {
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func post(t *testing.T, c *http.Client, u, ct string, body []byte) *http.Response {
	resp, err := c.Post(u, ct, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestDoH asks over HTTP/2 and HTTP/3, GET and POST, with Go's and
// quic-go's clients verifying the certificate.
func TestDoH(t *testing.T) {
	e := start(t)
	tlsConf := &tls.Config{RootCAs: e.cert.Pool}
	h2 := &http.Transport{TLSClientConfig: tlsConf, ForceAttemptHTTP2: true}
	h3 := &http3.Transport{TLSClientConfig: tlsConf}
	defer h2.CloseIdleConnections()
	defer h3.Close()
	wire := query(t, "www.example.test.", dns.TypeA)
	for _, c := range []struct {
		name  string
		rt    http.RoundTripper
		proto int
	}{{"HTTP/2", h2, 2}, {"HTTP/3", h3, 3}} {
		client := &http.Client{Transport: c.rt, Timeout: 10 * time.Second}
		for _, method := range []string{"GET", "POST"} {
			t.Run(c.name+" "+method, func(t *testing.T) {
				var resp *http.Response
				if method == "GET" {
					resp = get(t, client, e.doh.URL()+"?dns="+base64.RawURLEncoding.EncodeToString(wire))
				} else {
					resp = post(t, client, e.doh.URL(), doh.MediaType, wire)
				}
				body, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != 200 || resp.ProtoMajor != c.proto || resp.Header.Get("Content-Type") != doh.MediaType {
					t.Fatalf("status %d proto %d type %q, want 200 over HTTP/%d", resp.StatusCode, resp.ProtoMajor, resp.Header.Get("Content-Type"), c.proto)
				}
				if got := resp.Header.Get("Cache-Control"); got != "max-age=60" {
					t.Errorf("Cache-Control %q, want max-age=60", got)
				}
				if c.proto == 2 && !strings.Contains(resp.Header.Get("Alt-Svc"), `h3=":`+strconv.Itoa(int(e.doh.Addr().Port()))) {
					t.Errorf("Alt-Svc %q, want h3 on our port", resp.Header.Get("Alt-Svc"))
				}
				var m dns.Msg
				if err := m.Unpack(body); err != nil || len(m.Answer) != 1 || m.Answer[0].(*dns.A).A.String() != "192.0.2.10" || m.Id != 0 {
					t.Errorf("answer %v err %v", m.Answer, err)
				}
			})
		}
	}
}

// TestDoHErrors checks the HTTP status of each kind of bad request.
func TestDoHErrors(t *testing.T) {
	e := start(t)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: e.cert.Pool}, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	u := e.doh.URL()
	wire := query(t, "www.example.test.", dns.TypeA)
	cases := []struct {
		name string
		do   func() *http.Response
		want int
	}{
		{"GET without dns", func() *http.Response { return get(t, c, u) }, 400},
		{"GET not base64url", func() *http.Response { return get(t, c, u+"?dns=***") }, 400},
		{"GET garbage message", func() *http.Response { return get(t, c, u+"?dns=AAAA") }, 400},
		{"GET padded base64 is accepted", func() *http.Response {
			return get(t, c, u+"?dns="+base64.URLEncoding.EncodeToString(wire))
		}, 200},
		{"POST wrong type", func() *http.Response { return post(t, c, u, "text/plain", wire) }, 415},
		{"POST too large", func() *http.Response { return post(t, c, u, doh.MediaType, make([]byte, 70000)) }, 413},
		{"PUT", func() *http.Response {
			req, _ := http.NewRequest(http.MethodPut, u, nil)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { resp.Body.Close() })
			return resp
		}, 405},
		{"other path", func() *http.Response { return get(t, c, "https://"+e.doh.Addr().String()+"/other") }, 404},
	}
	for _, cs := range cases {
		if got := cs.do().StatusCode; got != cs.want {
			t.Errorf("%s: status %d, want %d", cs.name, got, cs.want)
		}
	}
}

// TestLastmileDoH is lastmile's DoH step against this server, GET and POST.
func TestLastmileDoH(t *testing.T) {
	e := start(t)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: e.cert.Pool}, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	for _, method := range []string{"GET", "POST"} {
		r, err := lastmile.NewResolver(lastmile.DNSConfig{
			Order: []lastmile.ResolverStep{lastmile.StepDoH}, DoHURL: e.doh.URL(), DoHMethod: method, Timeout: 10 * time.Second,
		}, lastmile.Options{DoHClient: &http.Client{Transport: tr}, Registerer: prometheus.NewRegistry(), Logger: obs.Discard})
		if err != nil {
			t.Fatal(err)
		}
		addrs, step, err := r.Resolve(context.Background(), "www.example.test")
		want := []netip.Addr{netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("2001:db8::10")}
		if err != nil || step != lastmile.StepDoH || !slices.Equal(addrs, want) {
			t.Errorf("%s: %v %s %v, want %v from doh", method, addrs, step, err, want)
		}
		r.Close()
	}
}

// TestKdigDoH asks with kdig over HTTPS, POST and GET.
func TestKdigDoH(t *testing.T) {
	kdig, err := exec.LookPath("kdig")
	if err != nil {
		t.Fatal("kdig not found: run scripts/test-deps.sh (Debian package knot-dnsutils)")
	}
	e := start(t)
	for mode, session := range map[string]string{"+https=/dns-query": "(HTTP/2-POST)", "+https-get": "(HTTP/2-GET)"} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		out, err := exec.CommandContext(ctx, kdig, "@"+e.doh.Addr().Addr().String(), "-p", strconv.Itoa(int(e.doh.Addr().Port())),
			mode, "+norec", "+time=5", "+retry=0", "www.example.test.", "A").CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("kdig %s: %v\n%s", mode, err, out)
		}
		if !strings.Contains(string(out), session) || !strings.Contains(string(out), "192.0.2.10") || !strings.Contains(string(out), "status: NOERROR") {
			t.Errorf("kdig %s:\n%s", mode, out)
		}
	}
}
