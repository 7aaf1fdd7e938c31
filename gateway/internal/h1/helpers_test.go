package h1

import (
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/veerhq/veer/obs"
)

// maxHeaderBytes is the gateway's default head bound (listen.max_header_bytes).
const maxHeaderBytes = 64 << 10

var discard *slog.Logger = obs.Discard

// newTestClient builds a Client as the gateway's transport for a plain
// HTTP/1.1 cluster does: the fallback http.Transport dials through
// CountWrites, the client through dial (a net.Dialer's when nil).
func newTestClient(dial DialFunc, maxIdle int) *Client {
	if dial == nil {
		dial = (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	t := &http.Transport{
		DialContext:            CountWrites(dial),
		MaxIdleConnsPerHost:    maxIdle,
		IdleConnTimeout:        90 * time.Second,
		DisableCompression:     true,
		MaxResponseHeaderBytes: MaxResponseHead,
		TLSClientConfig:        &tls.Config{},
	}
	p := new(http.Protocols)
	p.SetHTTP1(true)
	t.Protocols = p
	return NewClient(t, dial, maxIdle)
}
