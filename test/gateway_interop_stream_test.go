package test

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TestGatewayInteropWebSocket relays WebSocket connections between a client
// and a server we did not write (Debian's python3-websockets on both
// sides), over the plain listener and over TLS: text and binary messages up
// to 1 MiB echoed intact, a ping answered, a clean 1000 close, and the
// forwarding headers on the upgrade request.
func TestGatewayInteropWebSocket(t *testing.T) {
	py := debianPython(t, "websockets", "python3-websockets")
	addr, f := listen(t)
	startDaemon(t, "websockets server", py, nil, []*os.File{f}, "testdata/ws_echo_server.py")
	g := interopGateway(t, `
routes: [{name: r, clusters: [{name: ws}]}]
clusters: [{name: ws, backends: [{address: '`+addr+`'}]}]
`)
	for _, url := range []string{"ws://" + g.Addrs().Plain + "/chat?room=1", "wss://" + g.Addrs().TLS + "/chat?room=1"} {
		t.Run(url[:strings.Index(url, ":")], func(t *testing.T) {
			out := run(t, 30*time.Second, py, "testdata/ws_client.py", url)
			var got struct {
				Echoed, Mismatched int
				Pong               bool
				CloseCode          int `json:"close_code"`
				Greeting           struct{ Path, Via, Xff string }
			}
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("client output %q: %v", out, err)
			}
			t.Logf("%s: %+v", url, got)
			if got.Echoed != 56 || got.Mismatched != 0 || !got.Pong || got.CloseCode != 1000 {
				t.Errorf("want 56 messages echoed intact, a pong and close code 1000: %s", out)
			}
			if got.Greeting.Path != "/chat?room=1" || got.Greeting.Via != "1.1 veer" || got.Greeting.Xff != "127.0.0.1" {
				t.Errorf("the server saw path %q, Via %q, X-Forwarded-For %q", got.Greeting.Path, got.Greeting.Via, got.Greeting.Xff)
			}
		})
	}
}

// TestGatewayInteropGRPC calls a grpc-go health server through the gateway
// with a gRPC client we did not write (Debian's python3-grpcio, the gRPC
// C-core and its own HTTP/2), over h2c on the plain listener and over TLS:
// unary calls, a NotFound carried only in the trailers, 200 calls on one
// connection, and a server stream.
func TestGatewayInteropGRPC(t *testing.T) {
	py := debianPython(t, "grpc", "python3-grpcio")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("svc", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()
	g := interopGateway(t, `
routes: [{name: grpc, clusters: [{name: g}]}]
clusters: [{name: g, protocol: h2c, backends: [{address: '`+ln.Addr().String()+`'}]}]
`)
	certs, _ := filepath.Glob(filepath.Join(g.Config().DataDir, "*.crt"))
	if len(certs) != 1 {
		t.Fatalf("want the gateway's one self-signed certificate in its data dir, found %v", certs)
	}
	for _, tc := range []struct{ name, target, cert string }{
		{"h2c", g.Addrs().Plain, ""},
		{"tls", g.Addrs().TLS, certs[0]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"testdata/grpc_health_client.py", tc.target}
			if tc.cert != "" {
				args = append(args, tc.cert)
			}
			out := run(t, 60*time.Second, py, args...)
			t.Logf("python3-grpcio through the gateway (%s): %s", tc.name, out)
			var got struct {
				Check        bool
				TrailersCode string `json:"trailers_code"`
				Unknown      string
				RepeatedOK   int  `json:"repeated_ok"`
				WatchFirst   bool `json:"watch_first"`
			}
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("client output %q: %v", out, err)
			}
			if !got.Check || got.TrailersCode != "OK" || got.Unknown != "NOT_FOUND" || got.RepeatedOK != 200 || !got.WatchFirst {
				t.Errorf("want SERVING with status OK, NOT_FOUND for an unknown service, 200 of 200 repeated calls, a first Watch message: %s", out)
			}
		})
	}
}
