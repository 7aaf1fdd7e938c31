package up

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strconv"
)

// siteTransport is an HTTP/2 transport to site's gateway ("a" or "b") that
// trusts the local CA and names the site's domain, with no emulated
// network: veer up's own load generators (overload, the limited route,
// async submissions, the release load) beside the population. It returns
// the domain and the gateway's address too.
func (s *System) siteTransport(site string, maxIdle int) (tr *http.Transport, host, addr string, err error) {
	ip := map[string]string{"a": siteAIP, "b": siteBIP}[site]
	if ip == "" {
		return nil, "", "", fmt.Errorf("up: site %q: want a or b", site)
	}
	if s.env == nil {
		return nil, "", "", errClosed
	}
	host = site + "." + s.cfg.Zone
	s.mu.Lock()
	addr = net.JoinHostPort(ip, strconv.Itoa(s.state.Port))
	s.mu.Unlock()
	tr = &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: s.env.roots, ServerName: host},
		ForceAttemptHTTP2: true,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var nd net.Dialer
			return nd.DialContext(ctx, network, addr)
		},
		MaxIdleConnsPerHost: maxIdle,
	}
	return tr, host, addr, nil
}
