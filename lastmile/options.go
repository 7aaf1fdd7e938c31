package lastmile

import (
	"context"
	"crypto/x509"
	"log/slog"
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/veerhq/veer/clock"
)

// Options are the run-time dependencies that do not belong in a config file.
// The zero value uses the wall clock, slog.Default, the default Prometheus
// registerer, net.DefaultResolver and the system's root certificates.
type Options struct {
	// Clock drives TTLs, serve-stale ages and broken-protocol memory.
	Clock clock.Clock
	// Logger receives warnings (corrupt cache file, persistence errors).
	Logger *slog.Logger
	// Registerer receives the veer_lastmile_* metrics.
	Registerer prometheus.Registerer
	// SystemResolver is the "system" resolver step. Tests point it at a
	// loopback DNS server with PreferGo and Dial.
	SystemResolver *net.Resolver
	// DoHClient carries DNS-over-HTTPS queries. Default: an HTTP/2 client
	// trusting RootCAs that dials the DoH URL's host through the system
	// resolver (use an IP literal in DoHURL to avoid that dependency).
	DoHClient *http.Client
	// RootCAs verifies access nodes, CDN, scheduler and DoH servers.
	// Default: the system roots.
	RootCAs *x509.CertPool
	// DialContext dials TCP to nodes. Default: a net.Dialer.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// NetworkName, if set, returns an opaque label of the network the
	// device is on (say "wifi:"+a hash of the SSID, or "cellular"); it is
	// called by New and by each NetworkChanged. Broken-protocol memory is
	// persisted per label with the DNS cache (DNSConfig.CacheFile) and
	// restored when the device is back on a network with that label.
	// Default: every network is "", and a launch restores the memory of
	// the last network.
	NetworkName func() string
	// OnTrace, if set, is called with the Trace of every request after its
	// route was chosen (or the chain failed), for logs.
	OnTrace func(*Trace)
}
