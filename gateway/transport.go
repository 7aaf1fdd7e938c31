package gateway

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"time"

	"github.com/veerhq/veer/gateway/internal/h1"
)

// DefaultConnectTimeout bounds a TCP connect to a backend.
const DefaultConnectTimeout = 2 * time.Second

// defaultIdleConnTimeout closes upstream connections idle for longer.
const defaultIdleConnTimeout = 90 * time.Second

// newTransport returns the upstream connection pool of a cluster: one
// keep-alive pool per backend, HTTP/1.1, h2c or HTTP/2 over TLS. Plain
// HTTP/1.1 clusters without a connection cap use the gateway's own client
// (h1.Client), which hands what it does not handle (Upgrade, Expect) to an
// http.Transport; the others use http.Transport. Every connection counts
// the bytes written to it (h1.CountWrites), so that a failed attempt can tell
// whether its request left.
func newTransport(c Cluster, dial func(ctx context.Context, network, addr string) (net.Conn, error)) http.RoundTripper {
	if dial == nil {
		dial = (&net.Dialer{Timeout: DefaultConnectTimeout, KeepAlive: 30 * time.Second}).DialContext
	}
	t := &http.Transport{
		DialContext:            h1.CountWrites(dial),
		MaxIdleConnsPerHost:    c.MaxIdlePerBackend,
		MaxConnsPerHost:        c.MaxConnsPerBackend,
		IdleConnTimeout:        defaultIdleConnTimeout,
		TLSHandshakeTimeout:    DefaultConnectTimeout,
		DisableCompression:     true,
		MaxResponseHeaderBytes: h1.MaxResponseHead,
		TLSClientConfig:        &tls.Config{InsecureSkipVerify: c.InsecureSkipVerify}, //nolint:gosec // operator's choice, off by default
	}
	p := new(http.Protocols)
	switch c.Protocol {
	case "h2c":
		p.SetUnencryptedHTTP2(true)
	case "h2":
		p.SetHTTP2(true)
	default:
		p.SetHTTP1(true)
	}
	t.Protocols = p
	if (c.Protocol == "" || c.Protocol == "http1") && c.MaxConnsPerBackend == 0 {
		return h1.NewClient(t, dial, c.MaxIdlePerBackend)
	}
	return t
}
