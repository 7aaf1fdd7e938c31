package lastmile

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/outcome"
	"github.com/veerhq/veer/routing/schedule"
)

// ErrSchedule: the scheduling service's response is invalid (the
// schema's sentinel, routing/schedule.ErrResponse).
var ErrSchedule = schedule.ErrResponse

// scheduler is the scheduling-service client: it resolves the service's
// host through the resolver chain, POSTs a schedule.Request over TCP and, on
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
	nodes   []schedule.Node
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
func (s *scheduler) nodes(ctx context.Context, network uint64, domain string, tr *Trace) ([]schedule.Node, error) {
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
	body, err := json.Marshal(schedule.Request{Version: schedule.Version, Domain: domain, Client: s.cfg.Client,
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

func (s *scheduler) ask(ctx context.Context, network uint64, addr, sni string, body []byte, o raceOpts, tr *Trace) (*schedule.Response, error) {
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
	data, err := io.ReadAll(io.LimitReader(resp.Body, schedule.MaxBody+1))
	if err != nil {
		return nil, outcome.Wrap(outcome.ClassifyError(err), err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, outcome.Wrap(outcome.FromHTTPStatus(resp.StatusCode), fmt.Errorf("%w: HTTP status %s", ErrSchedule, strconv.Itoa(resp.StatusCode)))
	}
	r, err := schedule.ParseResponse(data)
	if err != nil {
		return nil, outcome.Wrap(outcome.ServerError, err)
	}
	return r, nil
}
