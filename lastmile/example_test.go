package lastmile_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/veerhq/veer/lastmile"
	"github.com/veerhq/veer/lastmile/lmtest"
	"github.com/veerhq/veer/obs"
)

// A request through the chain on loopback: the public DNS is dead, the
// private DNS answers; the Trace says so. The first contact goes over TCP
// (the node had not advertised HTTP/3); its Alt-Svc header is remembered,
// and the next chain run (here after a network change) races QUIC, which
// wins.
func ExampleTransport() {
	ca, _ := lmtest.NewCA()
	recs := map[string][]netip.Addr{"api.example": {netip.MustParseAddr("127.0.0.1")}}
	public, _ := lmtest.NewDNSServer(recs, 300)
	defer public.Close()
	private, _ := lmtest.NewDNSServer(recs, 300)
	defer private.Close()
	node, _ := lmtest.NewNode("node-1", ca, lmtest.NodeOptions{Names: []string{"api.example"}, AdvertiseH3: true})
	defer node.Close()
	public.SetMode(lmtest.Silent) // the public resolver is dead

	rt, err := lastmile.New(lastmile.Config{
		DNS:  lastmile.DNSConfig{PrivateServers: []string{private.Addr()}, Timeout: 200 * time.Millisecond},
		Race: lastmile.RaceConfig{TCPDelay: 2 * time.Second},
	}, lastmile.Options{
		SystemResolver: public.Resolver(),
		RootCAs:        ca.Pool(),
		Registerer:     prometheus.NewRegistry(),
		Logger:         obs.Discard,
	})
	if err != nil {
		panic(err)
	}
	defer rt.Close()

	_, port, _ := splitPort(node.Addr())
	tr := &lastmile.Trace{}
	req, _ := http.NewRequestWithContext(lastmile.WithTrace(context.Background(), tr),
		http.MethodGet, "https://api.example:"+port+"/", nil)
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(string(body))
	fmt.Println("served:", tr.Served, "resolver:", tr.Resolver, "protocol:", tr.Protocol)
	fmt.Println("failed:", tr.FailedSteps(), tr.Failures[0].Kind)

	rt.NetworkChanged()
	resp, err = (&http.Client{Transport: rt}).Get("https://api.example:" + port + "/")
	if err != nil {
		panic(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(string(body))
	// Output:
	// node-1 HTTP/2.0
	// served: direct resolver: private_udp protocol: h2
	// failed: [system] dns_timeout
	// node-1 HTTP/3.0
}

func splitPort(addr string) (string, string, error) {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			return addr[:i], addr[i+1:], nil
		}
	}
	return addr, "", nil
}

// Static hosts for failover: a Transport whose only resolver step is the
// bootstrap map reaches each failover domain at configured addresses, no
// DNS involved (the way to map names to addresses under
// failover.NewTransport).
func Example_staticHosts() {
	ca, _ := lmtest.NewCA()
	node, _ := lmtest.NewNode("dc1", ca, lmtest.NodeOptions{Names: []string{"dc1.example"}})
	defer node.Close()
	_, port, _ := splitPort(node.Addr())

	rt, err := lastmile.New(lastmile.Config{
		Steps: []lastmile.RouteStep{lastmile.StepDirect},
		DNS: lastmile.DNSConfig{
			Order:     []lastmile.ResolverStep{lastmile.StepBootstrap},
			Bootstrap: map[string][]string{"dc1.example": {"127.0.0.1"}, "api.example": {"192.0.2.1"}},
		},
	}, lastmile.Options{RootCAs: ca.Pool(), Registerer: prometheus.NewRegistry(), Logger: obs.Discard})
	if err != nil {
		panic(err)
	}
	defer rt.Close()
	resp, err := (&http.Client{Transport: rt}).Get("https://dc1.example:" + port + "/")
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(string(body))
	// Output:
	// dc1 HTTP/2.0
}
