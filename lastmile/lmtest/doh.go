package lmtest

import (
	"crypto/tls"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/miekg/dns"
)

// DoHServer is an RFC 8484 DNS-over-HTTPS endpoint at /dns-query that
// forwards each query over TCP to a backend DNS server.
type DoHServer struct {
	srv     *http.Server
	ln      net.Listener
	backend string
	down    atomic.Bool
	wg      sync.WaitGroup
}

// NewDoHServer starts a DoH server (HTTP/2 over TLS, certificate from ca)
// forwarding to backend ("ip:port").
func NewDoHServer(ca *CA, backend string) (*DoHServer, error) {
	cert, err := ca.Issue("doh.test")
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	d := &DoHServer{backend: backend}
	d.ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}})
	mux := http.NewServeMux()
	mux.HandleFunc("/dns-query", d.serve)
	d.srv = &http.Server{Handler: mux}
	d.wg.Add(1)
	go func() { defer d.wg.Done(); _ = d.srv.Serve(d.ln) }()
	return d, nil
}

// URL is the endpoint's URL (https://127.0.0.1:port/dns-query).
func (d *DoHServer) URL() string { return "https://" + d.ln.Addr().String() + "/dns-query" }

// SetDown makes the endpoint answer 502 when on.
func (d *DoHServer) SetDown(on bool) { d.down.Store(on) }

// Close stops the server.
func (d *DoHServer) Close() error {
	err := d.srv.Close()
	d.wg.Wait()
	return err
}

func (d *DoHServer) serve(w http.ResponseWriter, r *http.Request) {
	if d.down.Load() {
		http.Error(w, "down", http.StatusBadGateway)
		return
	}
	var wire []byte
	var err error
	switch r.Method {
	case http.MethodGet:
		wire, err = base64.RawURLEncoding.DecodeString(r.URL.Query().Get("dns"))
	case http.MethodPost:
		if r.Header.Get("Content-Type") != "application/dns-message" {
			http.Error(w, "content type", http.StatusUnsupportedMediaType)
			return
		}
		wire, err = io.ReadAll(io.LimitReader(r.Body, 65535))
	default:
		http.Error(w, "method", http.StatusMethodNotAllowed)
		return
	}
	q := new(dns.Msg)
	if err != nil || q.Unpack(wire) != nil {
		http.Error(w, "bad query", http.StatusBadRequest)
		return
	}
	c := &dns.Client{Net: "tcp"}
	resp, _, err := c.ExchangeContext(r.Context(), q, d.backend)
	if err != nil {
		http.Error(w, "backend: "+err.Error(), http.StatusBadGateway)
		return
	}
	out, err := resp.Pack()
	if err != nil {
		http.Error(w, "pack", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/dns-message")
	_, _ = w.Write(out)
}
