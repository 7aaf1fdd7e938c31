// Package gatewayh3 serves the gateway over HTTP/3 (quic-go). It lives in
// its own package so that users of package gateway who do not want HTTP/3
// do not link QUIC; cmd/veer wires Listen into gateway.Options.HTTP3.
//
// Failure mode: Listen fails when the UDP port cannot be bound; a running
// listener's errors end its Serve goroutine and are logged by quic-go's
// caller (the gateway keeps serving TCP).
package gatewayh3

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"

	"github.com/quic-go/quic-go/http3"

	"github.com/veerhq/veer/gateway"
)

var _ gateway.HTTP3Func = Listen

// Listen binds the UDP address addr and serves h over HTTP/3 with tlsConf
// (its GetCertificate is kept, so certificate reloads apply). Shutdown sends
// GOAWAY and waits for requests in flight.
func Listen(addr string, tlsConf *tls.Config, h http.Handler) (gateway.HTTP3Server, error) {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, err
	}
	srv := &http3.Server{Handler: h, TLSConfig: http3.ConfigureTLSConfig(tlsConf)}
	go func() { _ = srv.Serve(pc) }()
	return &server{srv: srv, pc: pc}, nil
}

type server struct {
	srv *http3.Server
	pc  net.PacketConn
}

func (s *server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	_ = s.pc.Close()
	return err
}

func (s *server) Close() error {
	err := s.srv.Close()
	_ = s.pc.Close()
	return err
}
