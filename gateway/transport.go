package gateway

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"time"
)

// DefaultConnectTimeout bounds a TCP connect to a backend.
const DefaultConnectTimeout = 2 * time.Second

// defaultIdleConnTimeout closes upstream connections idle for longer.
const defaultIdleConnTimeout = 90 * time.Second

// newTransport returns the upstream connection pool of a cluster: one
// keep-alive pool per backend, HTTP/1.1, h2c or HTTP/2 over TLS. Plain
// HTTP/1.1 clusters without a connection cap use the gateway's own client
// (h1Client), which hands what it does not handle (Upgrade, Expect) to an
// http.Transport; the others use http.Transport. Every connection counts
// the bytes written to it (countingConn), so that a failed attempt can tell
// whether its request left.
func newTransport(c Cluster, dial func(ctx context.Context, network, addr string) (net.Conn, error)) http.RoundTripper {
	if dial == nil {
		dial = (&net.Dialer{Timeout: DefaultConnectTimeout, KeepAlive: 30 * time.Second}).DialContext
	}
	counted := func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: conn, readLeft: -1}, nil
	}
	t := &http.Transport{
		DialContext:            counted,
		MaxIdleConnsPerHost:    c.MaxIdlePerBackend,
		MaxConnsPerHost:        c.MaxConnsPerBackend,
		IdleConnTimeout:        defaultIdleConnTimeout,
		TLSHandshakeTimeout:    DefaultConnectTimeout,
		DisableCompression:     true,
		MaxResponseHeaderBytes: maxResponseHead,
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
		return newH1Client(t, dial, c.MaxIdlePerBackend)
	}
	return t
}
