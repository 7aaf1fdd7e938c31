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

// newTransport returns the upstream connection pool of a cluster: one
// keep-alive pool per backend, HTTP/1.1, h2c or HTTP/2 over TLS.
func newTransport(c Cluster, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Transport {
	if dial == nil {
		dial = (&net.Dialer{Timeout: DefaultConnectTimeout, KeepAlive: 30 * time.Second}).DialContext
	}
	t := &http.Transport{
		DialContext:         dial,
		MaxIdleConnsPerHost: c.MaxIdlePerBackend,
		MaxConnsPerHost:     c.MaxConnsPerBackend,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: DefaultConnectTimeout,
		DisableCompression:  true,
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: c.InsecureSkipVerify}, //nolint:gosec // operator's choice, off by default
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
	return t
}
