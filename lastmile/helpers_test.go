package lastmile

import (
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/veerhq/veer/lastmile/lmtest"
	"github.com/veerhq/veer/obs"
)

// dnsEnv is a set of real DNS servers on loopback: the "public" one the
// system resolver step uses, the private one ("ZNS"), and a DoH endpoint
// backed by a third.
type dnsEnv struct {
	ca      *lmtest.CA
	public  *lmtest.DNSServer
	private *lmtest.DNSServer
	dohBack *lmtest.DNSServer
	doh     *lmtest.DoHServer
}

func newDNSEnv(t testing.TB, records map[string][]netip.Addr) *dnsEnv {
	t.Helper()
	ca, err := lmtest.NewCA()
	must(t, err)
	e := &dnsEnv{ca: ca}
	e.public, err = lmtest.NewDNSServer(records, 300)
	must(t, err)
	t.Cleanup(func() { e.public.Close() })
	e.private, err = lmtest.NewDNSServer(records, 300)
	must(t, err)
	t.Cleanup(func() { e.private.Close() })
	e.dohBack, err = lmtest.NewDNSServer(records, 300)
	must(t, err)
	t.Cleanup(func() { e.dohBack.Close() })
	e.doh, err = lmtest.NewDoHServer(ca, e.dohBack.Addr())
	must(t, err)
	t.Cleanup(func() { e.doh.Close() })
	return e
}

// dnsConfig configures every resolver step against the env, with short
// timeouts so that dead servers fail fast.
func (e *dnsEnv) dnsConfig() DNSConfig {
	return DNSConfig{
		PrivateServers: []string{e.private.Addr()},
		DoHURL:         e.doh.URL(),
		Timeout:        600 * time.Millisecond, // a DoH step (TLS + HTTP/2) must fit under -race on a loaded machine
	}
}

func (e *dnsEnv) options(t testing.TB) Options {
	tr := &http.Transport{TLSClientConfig: tlsConfig(e.ca), ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	return Options{
		SystemResolver: e.public.Resolver(),
		DoHClient:      &http.Client{Transport: tr},
		RootCAs:        e.ca.Pool(),
		Registerer:     prometheus.NewRegistry(),
		Logger:         obs.Discard,
	}
}

// steps converts step names for comparison with Trace.FailedSteps.
func steps[S ~string](s ...S) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = string(v)
	}
	return out
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func addrs(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, a := range s {
		out[i] = netip.MustParseAddr(a)
	}
	return out
}
