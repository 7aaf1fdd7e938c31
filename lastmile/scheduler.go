package lastmile

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/outcome"
)

// ScheduleVersion is the version of the scheduling API schema
// (docs/lastmile.md) this client speaks.
const ScheduleVersion = 1

// Limits of a schedule response; larger responses are rejected.
const (
	maxScheduleBody  = 64 << 10
	maxScheduleNodes = 32
	maxScheduleTTL   = 24 * 60 * 60
)

// ErrSchedule: the scheduling service's response is invalid.
var ErrSchedule = errors.New("lastmile: bad schedule response")

// ScheduleRequest is the body the client POSTs to the scheduling service.
// The service sees the client's address on the connection.
type ScheduleRequest struct {
	// Version is ScheduleVersion.
	Version int `json:"version"`
	// Domain is the service domain the client wants to reach.
	Domain string `json:"domain"`
	// Client names the SDK and its version.
	Client string `json:"client"`
	// Protocols the client can speak, in preference order.
	Protocols []string `json:"protocols"`
}

// ScheduleResponse is the scheduling service's answer.
type ScheduleResponse struct {
	// Version must equal the request's version.
	Version int `json:"version"`
	// TTLSeconds is how long the client may reuse the answer (0: do not
	// cache; at most 86400).
	TTLSeconds int `json:"ttl_seconds"`
	// Nodes are the access nodes in the order the client must try them.
	Nodes []AccessNode `json:"nodes"`
}

// AccessNode is one access node in a schedule response.
type AccessNode struct {
	// Addr is "ip:port"; access nodes are reached without DNS.
	Addr string `json:"addr"`
	// ServerName is the TLS server name; empty means the requested domain.
	ServerName string `json:"server_name,omitempty"`
	// Protocols the node serves ("h3", "h2", "http/1.1"); empty means all.
	Protocols []string `json:"protocols,omitempty"`
}

// ParseScheduleResponse decodes and validates a schedule response body.
// Unknown fields are ignored (the service may add some within a version);
// a wrong version, a bad address or too many nodes are errors.
func ParseScheduleResponse(data []byte) (*ScheduleResponse, error) {
	if len(data) > maxScheduleBody {
		return nil, fmt.Errorf("%w: body of %d bytes", ErrSchedule, len(data))
	}
	var r ScheduleResponse
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSchedule, err)
	}
	if r.Version != ScheduleVersion {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrSchedule, r.Version, ScheduleVersion)
	}
	if r.TTLSeconds < 0 || r.TTLSeconds > maxScheduleTTL {
		return nil, fmt.Errorf("%w: ttl_seconds %d out of 0..%d", ErrSchedule, r.TTLSeconds, maxScheduleTTL)
	}
	if len(r.Nodes) == 0 || len(r.Nodes) > maxScheduleNodes {
		return nil, fmt.Errorf("%w: %d nodes, want 1..%d", ErrSchedule, len(r.Nodes), maxScheduleNodes)
	}
	for i, n := range r.Nodes {
		ap, err := netip.ParseAddrPort(n.Addr)
		if err != nil || !usable(ap.Addr().Unmap()) || ap.Port() == 0 {
			return nil, fmt.Errorf("%w: nodes[%d].addr %q: want ip:port", ErrSchedule, i, n.Addr)
		}
		for _, p := range n.Protocols {
			if p != "h3" && p != "h2" && p != "http/1.1" {
				return nil, fmt.Errorf("%w: nodes[%d]: unknown protocol %q", ErrSchedule, i, p)
			}
		}
	}
	return &r, nil
}

// offers reports whether the node serves protocol p.
func (n AccessNode) offers(p string) bool {
	if len(n.Protocols) == 0 {
		return true
	}
	for _, q := range n.Protocols {
		if q == p {
			return true
		}
	}
	return false
}

// scheduler is the scheduling-service client: it resolves the service's
// host through the resolver chain, POSTs a ScheduleRequest over TCP and, on
// failure, retries with HTTP/3 and HTTP/2 raced; answers are cached per
// domain for their TTL.
type scheduler struct {
	cfg   SchedulerConfig
	u     *url.URL
	clk   clock.Clock
	res   *Resolver
	racer *racer
	m     *metrics

	mu    sync.Mutex
	cache map[string]schedEntry
}

type schedEntry struct {
	nodes   []AccessNode
	expires time.Time
}

func newScheduler(cfg SchedulerConfig, opts Options, res *Resolver, rc *racer, m *metrics) *scheduler {
	u, _ := url.Parse(cfg.URL) // validated
	return &scheduler{cfg: cfg, u: u, clk: clock.Or(opts.Clock), res: res, racer: rc, m: m, cache: map[string]schedEntry{}}
}

func (s *scheduler) forget() {
	s.mu.Lock()
	clear(s.cache)
	s.mu.Unlock()
}

// cached reports whether an answer for domain is cached and fresh.
func (s *scheduler) cached(domain string) bool {
	s.mu.Lock()
	e, ok := s.cache[domain]
	s.mu.Unlock()
	return ok && s.clk.Now().Before(e.expires)
}

// nodes returns the access nodes for domain.
func (s *scheduler) nodes(ctx context.Context, network uint64, domain string, tr *Trace) ([]AccessNode, error) {
	s.mu.Lock()
	e, ok := s.cache[domain]
	s.mu.Unlock()
	if ok && s.clk.Now().Before(e.expires) {
		return e.nodes, nil
	}
	host, port := splitHostPort(s.u.Host, 443)
	ips, _, err := s.res.Resolve(ctx, host)
	if err != nil {
		s.fail(tr, err)
		return nil, err
	}
	body, err := json.Marshal(ScheduleRequest{Version: ScheduleVersion, Domain: domain, Client: s.cfg.Client,
		Protocols: []string{"h3", "h2", "http/1.1"}})
	if err != nil {
		return nil, err
	}
	// First over TCP to each address, then HTTP/3 and HTTP/2 raced.
	var last error
	for _, o := range []raceOpts{{noH3: true}, {h3: true, together: true}} {
		for _, ip := range ips[:min(len(ips), 2)] {
			addr := net.JoinHostPort(ip.String(), port)
			resp, err := s.ask(ctx, network, addr, host, body, o, tr)
			if err == nil {
				ttl := min(time.Duration(resp.TTLSeconds)*time.Second, s.cfg.MaxTTL)
				if ttl > 0 {
					s.mu.Lock()
					s.cache[domain] = schedEntry{resp.Nodes, s.clk.Now().Add(ttl)}
					s.mu.Unlock()
				}
				return resp.Nodes, nil
			}
			last = err
			s.fail(tr, err)
			if ctx.Err() != nil {
				return nil, err
			}
		}
	}
	return nil, last
}

func (s *scheduler) fail(tr *Trace, err error) {
	k := outcome.ClassifyError(err)
	if k == outcome.ClientCanceled {
		return // canceled because another step won: not a failure
	}
	tr.fail(Failure{Route: StepScheduler, Target: s.u.Host, Kind: k, Err: err})
	s.m.fail(string(StepScheduler), k)
}

func (s *scheduler) ask(ctx context.Context, network uint64, addr, sni string, body []byte, o raceOpts, tr *Trace) (*ScheduleResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	c, err := s.racer.race(ctx, network, addr, sni, o, tr)
	if err != nil {
		return nil, err
	}
	n := newNodeRT(s.racer, c, addr, sni, true)
	defer n.close()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := n.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxScheduleBody+1))
	if err != nil {
		return nil, outcome.Wrap(outcome.ClassifyError(err), err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, outcome.Wrap(outcome.FromHTTPStatus(resp.StatusCode), fmt.Errorf("%w: HTTP status %s", ErrSchedule, strconv.Itoa(resp.StatusCode)))
	}
	r, err := ParseScheduleResponse(data)
	if err != nil {
		return nil, outcome.Wrap(outcome.ServerError, err)
	}
	return r, nil
}
