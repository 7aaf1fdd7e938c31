// Package schedule is the wire schema of the scheduling API (seed 002's
// "access-ctrl"): the body a client POSTs to /v1/schedule and the access
// nodes the control plane answers with (docs/lastmile.md). Client
// (lastmile) and server (control) both import it, so the schema is written
// once; it sits beside routing's wire schema (routing/wire.go) and, like
// the vocabulary packages, uses the standard library only.
//
// Contract: Request and Response are plain JSON values; ParseResponse is
// the one check of an answer, and what it accepts is usable as it is: a
// Version a client speaks, 1..MaxNodes nodes with ip:port addresses and
// known protocols, a TTL in 0..MaxTTLSeconds. Unknown fields are ignored
// (the service may add some within a version).
//
// Failure mode: every error of ParseResponse wraps ErrResponse and names
// the field; a body over MaxBody is refused before it is decoded.
package schedule

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
)

// Version is the version of the schema this package speaks.
const Version = 1

// Limits of a response; larger responses are rejected.
const (
	// MaxBody is the largest response body a client reads.
	MaxBody = 64 << 10
	// MaxNodes is the most nodes in one response.
	MaxNodes = 32
	// MaxTTLSeconds bounds a response's ttl_seconds (a day).
	MaxTTLSeconds = 24 * 60 * 60
)

// Protocols are the protocols an access node may serve, as the schema
// names them.
var Protocols = []string{"h3", "h2", "http/1.1"}

// KnownProtocol reports whether p is one of Protocols.
func KnownProtocol(p string) bool { return slices.Contains(Protocols, p) }

// ErrResponse: the scheduling service's response is invalid. Its text is
// the client's (lastmile re-exports it as ErrSchedule), as before the schema
// had a package of its own.
var ErrResponse = errors.New("lastmile: bad schedule response")

// Request is the body the client POSTs to the scheduling service.
// The service sees the client's address on the connection.
type Request struct {
	// Version is Version.
	Version int `json:"version"`
	// Domain is the service domain the client wants to reach.
	Domain string `json:"domain"`
	// Client names the SDK and its version.
	Client string `json:"client"`
	// Protocols the client can speak, in preference order.
	Protocols []string `json:"protocols"`
}

// Response is the scheduling service's answer.
type Response struct {
	// Version must equal the request's version.
	Version int `json:"version"`
	// TTLSeconds is how long the client may reuse the answer (0: do not
	// cache; at most MaxTTLSeconds).
	TTLSeconds int `json:"ttl_seconds"`
	// Nodes are the access nodes in the order the client must try them.
	Nodes []Node `json:"nodes"`
}

// Node is one access node as the client sees it. The control plane's
// access document (store/docs.AccessNode) embeds it and adds what only the
// server reads, so a field added here reaches both.
type Node struct {
	// Addr is "ip:port"; access nodes are reached without DNS.
	Addr string `json:"addr" yaml:"addr"`
	// ServerName is the TLS server name; empty means the requested domain.
	ServerName string `json:"server_name,omitempty" yaml:"server_name,omitempty"`
	// Protocols the node serves ("h3", "h2", "http/1.1"); empty means all.
	Protocols []string `json:"protocols,omitempty" yaml:"protocols,omitempty"`
}

// Offers reports whether the node serves protocol p.
func (n Node) Offers(p string) bool {
	return len(n.Protocols) == 0 || slices.Contains(n.Protocols, p)
}

// ParseResponse decodes and validates a schedule response body.
// Unknown fields are ignored (the service may add some within a version);
// a wrong version, a bad address or too many nodes are errors.
func ParseResponse(data []byte) (*Response, error) {
	if len(data) > MaxBody {
		return nil, fmt.Errorf("%w: body of %d bytes", ErrResponse, len(data))
	}
	var r Response
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrResponse, err)
	}
	if r.Version != Version {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrResponse, r.Version, Version)
	}
	if r.TTLSeconds < 0 || r.TTLSeconds > MaxTTLSeconds {
		return nil, fmt.Errorf("%w: ttl_seconds %d out of 0..%d", ErrResponse, r.TTLSeconds, MaxTTLSeconds)
	}
	if len(r.Nodes) == 0 || len(r.Nodes) > MaxNodes {
		return nil, fmt.Errorf("%w: %d nodes, want 1..%d", ErrResponse, len(r.Nodes), MaxNodes)
	}
	for i, n := range r.Nodes {
		ap, err := netip.ParseAddrPort(n.Addr)
		if err != nil || !UsableAddr(ap.Addr().Unmap()) || ap.Port() == 0 {
			return nil, fmt.Errorf("%w: nodes[%d].addr %q: want ip:port", ErrResponse, i, n.Addr)
		}
		for _, p := range n.Protocols {
			if !KnownProtocol(p) {
				return nil, fmt.Errorf("%w: nodes[%d]: unknown protocol %q", ErrResponse, i, p)
			}
		}
	}
	return &r, nil
}

// UsableAddr reports whether a client can connect to a: valid, and not
// unspecified, multicast or the broadcast address. lastmile checks DNS
// answers with it too.
func UsableAddr(a netip.Addr) bool {
	return a.IsValid() && !a.IsUnspecified() && !a.IsMulticast() && a != netip.AddrFrom4([4]byte{255, 255, 255, 255})
}
