package netem

import (
	"context"
	"errors"
	"net"
	"sync"
)

// ErrClosed: the Path was closed.
var ErrClosed = errors.New("netem: path closed")

// Path is one device's network: every address it reaches goes through a
// Proxy of its own with the Path's Config, started on first use (one relay
// per target, UDP and TCP). Dial is a DialContext for the device's TCP;
// Via gives the address to send the device's UDP (its DNS queries) to.
type Path struct {
	cfg Config

	mu      sync.Mutex
	proxies map[string]*Proxy
	closed  bool
}

// NewPath returns a Path with cfg; no relay runs until it is used.
func NewPath(cfg Config) *Path { return &Path{cfg: cfg, proxies: map[string]*Proxy{}} }

// proxy returns the relay to target, starting it.
func (p *Path) proxy(target string) (*Proxy, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	if x := p.proxies[target]; x != nil {
		return x, nil
	}
	cfg := p.cfg
	cfg.Seed += uint64(len(p.proxies)) // each relay draws its own losses
	x, err := New(target, cfg)
	if err != nil {
		return nil, err
	}
	p.proxies[target] = x
	return x, nil
}

// Dial connects to addr through the Path's relay to it, charging the
// handshake as Proxy.Dial does.
func (p *Path) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	x, err := p.proxy(addr)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	return x.Dial(ctx, network, x.Addr())
}

// Via returns the relay's address for target ("127.0.0.1:port"), for
// clients that are given an address rather than a dialer (a DNS server).
func (p *Path) Via(target string) (string, error) {
	x, err := p.proxy(target)
	if err != nil {
		return "", err
	}
	return x.Addr(), nil
}

// Close stops every relay of the Path.
func (p *Path) Close() error {
	p.mu.Lock()
	p.closed = true
	ps := p.proxies
	p.proxies = nil
	p.mu.Unlock()
	var errs []error
	for _, x := range ps {
		errs = append(errs, x.Close())
	}
	return errors.Join(errs...)
}
