package up

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/veerhq/veer/async"
)

// The demo's async route (issue 29 in veer up): both gateways serve
// PathReports as `async: true` (202 + an invocation id once the queue
// stored it durably, run later against the site's clusters); veer up
// submits a steady trickle to each gateway with an Idempotency-Key and
// polls each invocation's status, and `veer chaos run async-kill` bursts
// submissions while it kills a gateway.
const (
	// asyncAckWait is the gateways' ack_wait: a report takes
	// DefaultReportLatency, so an invocation whose worker died is
	// redelivered 5 s later rather than after the default 30 s.
	asyncAckWait = 5 * time.Second
	// asyncAttemptTimeout bounds one attempt (inside ack_wait).
	asyncAttemptTimeout = 3 * time.Second
	// asyncTenantHeader carries the submitter's tenant (the gateways'
	// async.tenant_key).
	asyncTenantHeader = "Veer-Tenant"
	// asyncTenants is how many tenants the submitters spread over.
	asyncTenants = 4
	// asyncResendPause is a client's pause before resending a submission
	// that got no 202 (a refused connection, a 503).
	asyncResendPause = 100 * time.Millisecond
	// asyncPollEvery is how often the steady submitter asks an
	// invocation's status; asyncPollFor how long it keeps asking.
	asyncPollEvery = 500 * time.Millisecond
	asyncPollFor   = 2 * time.Minute
	// asyncMaxInFlight bounds the steady submitter's open submissions and
	// polls per gateway; a tick that finds it full is skipped.
	asyncMaxInFlight = 64
	// MaxAsyncBurstRate and MaxAsyncBurstDuration bound POST
	// /v1/fault/async.
	MaxAsyncBurstRate     = 1000
	MaxAsyncBurstDuration = time.Minute
)

// asyncYAML is the gateways' async section: embedded JetStream in each
// gateway's data dir, or the NATS cluster both use.
func (s *System) asyncYAML() string {
	eng := "engine: embedded"
	if urls := s.natsURLs(); len(urls) > 0 {
		q := make([]string, len(urls))
		for i, u := range urls {
			q[i] = strconv.Quote(u)
		}
		eng = "engine: external, urls: [" + strings.Join(q, ", ") + "]"
	}
	return fmt.Sprintf("async: {%s, ack_wait: %s, attempt_timeout: %s, submit_timeout: 2s, tenant_key: %q, groups: [{name: general, concurrency: %d}]}\n",
		eng, asyncAckWait, asyncAttemptTimeout, "header:"+asyncTenantHeader, s.cfg.Async.Workers)
}

// natsURLs is what the gateways' external engine connects to: the local
// nats-server child's URL, the configured cluster's, or none (embedded).
func (s *System) natsURLs() []string {
	if s.natsURL != "" {
		return []string{s.natsURL}
	}
	return s.cfg.Async.natsURLs()
}

// startNATS starts Debian's nats-server -js as a supervised child when
// async.nats is "local" (its store in DATA/nats, a free loopback port).
func (s *System) startNATS(ctx context.Context) error {
	if s.cfg.Async.NATS != NATSLocal {
		return nil
	}
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		return fmt.Errorf("--nats local: nats-server not found (%v): install Debian's nats-server (scripts/test-deps.sh does)", err)
	}
	addr, err := s.freeAddr()
	if err != nil {
		return err
	}
	host, port, _ := net.SplitHostPort(addr)
	ch := s.newChild("nats", "-js", "-sd", filepath.Join(s.dir, "nats"), "-a", host, "-p", port)
	ch.exe = bin
	s.natsChild = ch
	if err := ch.start(); err != nil {
		return err
	}
	if err := waitTCP(ctx, addr); err != nil {
		return fmt.Errorf("nats-server: %w (log %s)", err, s.logPath("nats"))
	}
	s.natsURL = "nats://" + addr
	s.mu.Lock()
	s.state.NATS = s.natsURL
	s.mu.Unlock()
	return nil
}

// asyncClient submits reports to one site's gateway over TLS (the local
// CA), dialling the gateway's address whatever the name.
type asyncClient struct {
	client *http.Client
	tr     *http.Transport
	base   string
}

func (s *System) newAsyncClient(site string) (*asyncClient, error) {
	tr, host, addr, err := s.siteTransport(site, 16)
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	return &asyncClient{client: &http.Client{Transport: tr, Timeout: 3 * time.Second}, tr: tr, base: "https://" + host + ":" + port}, nil
}

func (c *asyncClient) close() { c.tr.CloseIdleConnections() }

// submit posts one report under key until a 202 names its invocation or
// ctx ends; it resends after a refused connection, a timeout or a non-202
// (safe: the key makes the submission idempotent). It returns the id and
// how many resends it took.
func (c *asyncClient) submit(ctx context.Context, key, tenant string) (string, int, error) {
	resends := 0
	for {
		id, err := c.submitOnce(ctx, key, tenant)
		if err == nil {
			return id, resends, nil
		}
		t := time.NewTimer(asyncResendPause)
		select {
		case <-ctx.Done():
			t.Stop()
			return "", resends, fmt.Errorf("no 202 for %s: %w (last: %v)", key, ctx.Err(), err)
		case <-t.C:
		}
		resends++
	}
}

func (c *asyncClient) submitOnce(ctx context.Context, key, tenant string) (string, error) {
	body := fmt.Sprintf(`{"report":%q}`, key)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+PathReports, strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set(async.KeyHeader, key)
	req.Header.Set(asyncTenantHeader, tenant)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var rep struct {
		ID string `json:"id"`
	}
	err = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&rep)
	if resp.StatusCode != http.StatusAccepted || err != nil || rep.ID == "" {
		return "", fmt.Errorf("submit: %s (%v)", resp.Status, err)
	}
	return rep.ID, nil
}

// state asks an invocation's status (GET /v1/invocations/{id}).
func (c *asyncClient) state(ctx context.Context, id, tenant string) (async.State, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+async.StatusPath+id, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set(asyncTenantHeader, tenant)
	resp, err := c.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %s: %s", id, resp.Status)
	}
	var st struct {
		State async.State `json:"state"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&st); err != nil {
		return "", err
	}
	return st.State, nil
}

// AsyncCounts are one site's async submissions by veer up's steady
// submitter (GET /v1/async).
type AsyncCounts struct {
	// Submitted submissions; Accepted got a 202; Resends were sent again
	// after no 202; GaveUp never got one within asyncPollFor.
	Submitted int64 `json:"submitted"`
	Accepted  int64 `json:"accepted"`
	Resends   int64 `json:"resends"`
	GaveUp    int64 `json:"gave_up"`
	// Succeeded and Failed: the status API's final state; Skipped ticks
	// found asyncMaxInFlight open.
	Succeeded int64 `json:"succeeded"`
	Failed    int64 `json:"failed"`
	Skipped   int64 `json:"skipped"`
}

// asyncStats guards the steady submitter's counts by site.
type asyncStats struct {
	mu sync.Mutex
	m  map[string]*AsyncCounts
}

func (a *asyncStats) do(site string, f func(*AsyncCounts)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[string]*AsyncCounts{}
	}
	c := a.m[site]
	if c == nil {
		c = &AsyncCounts{}
		a.m[site] = c
	}
	f(c)
}

// Async is the steady submitter's counts by site.
func (s *System) Async() map[string]AsyncCounts {
	s.async.mu.Lock()
	defer s.async.mu.Unlock()
	out := map[string]AsyncCounts{}
	for k, v := range s.async.m {
		out[k] = *v
	}
	return out
}

// runAsync submits Async.Rate reports a second to site's gateway until ctx
// ends, each with its own key, and polls each accepted one until it ran.
func (s *System) runAsync(ctx context.Context, site string) {
	c, err := s.newAsyncClient(site)
	if err != nil {
		s.log.Error("async submitter", "site", site, "err", err)
		return
	}
	defer c.close()
	nonce := newNonce()
	t := time.NewTicker(time.Duration(float64(time.Second) / s.cfg.Async.Rate))
	defer t.Stop()
	sem := make(chan struct{}, asyncMaxInFlight)
	var wg sync.WaitGroup
	defer wg.Wait()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		select {
		case sem <- struct{}{}:
		default:
			s.async.do(site, func(a *AsyncCounts) { a.Skipped++ })
			continue
		}
		key, tenant := fmt.Sprintf("up-%s-%s-%d", site, nonce, n), fmt.Sprintf("tenant-%d", n%asyncTenants)
		wg.Go(func() {
			defer func() { <-sem }()
			s.steadyOne(ctx, c, site, key, tenant)
		})
	}
}

func (s *System) steadyOne(ctx context.Context, c *asyncClient, site, key, tenant string) {
	ctx, cancel := context.WithTimeout(ctx, asyncPollFor)
	defer cancel()
	s.async.do(site, func(a *AsyncCounts) { a.Submitted++ })
	id, resends, err := c.submit(ctx, key, tenant)
	s.async.do(site, func(a *AsyncCounts) {
		a.Resends += int64(resends)
		if err != nil {
			a.GaveUp++
		} else {
			a.Accepted++
		}
	})
	if err != nil {
		return
	}
	for {
		t := time.NewTimer(asyncPollEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		switch st, _ := c.state(ctx, id, tenant); st {
		case async.Succeeded:
			s.async.do(site, func(a *AsyncCounts) { a.Succeeded++ })
			return
		case async.Failed:
			s.async.do(site, func(a *AsyncCounts) { a.Failed++ })
			return
		}
	}
}

func newNonce() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// AsyncBurstResult is POST /v1/fault/async's answer: what the burst
// submitted and the invocation id each key's 202 named.
type AsyncBurstResult struct {
	Site      string  `json:"site"`
	Rate      float64 `json:"rate"`
	Submitted int     `json:"submitted"`
	Accepted  int     `json:"accepted"`
	Resends   int     `json:"resends"`
	// GaveUp submissions got no 202 by their deadline (GaveUpKeys).
	GaveUp     int      `json:"gave_up"`
	GaveUpKeys []string `json:"gave_up_keys,omitempty"`
	// Nonce is in every key of the burst: "chaos-NONCE-N".
	Nonce string `json:"nonce"`
	// IDs maps each accepted submission's key to its invocation id.
	IDs map[string]string `json:"ids"`
}

// AsyncBurst submits rate reports a second to site's gateway for d (open
// loop), each under its own Idempotency-Key and resent until it gets a 202
// or until deadline after the burst ends, and returns once every
// submission has its answer.
func (s *System) AsyncBurst(ctx context.Context, site string, rate float64, d, deadline time.Duration) (AsyncBurstResult, error) {
	if !(rate >= 1 && rate <= MaxAsyncBurstRate) || d <= 0 || d > MaxAsyncBurstDuration || deadline < 0 || deadline > 10*time.Minute {
		return AsyncBurstResult{}, fmt.Errorf("up: async burst: rate 1..%d, duration up to %v, deadline up to 10m", MaxAsyncBurstRate, MaxAsyncBurstDuration)
	}
	c, err := s.newAsyncClient(site)
	if err != nil {
		return AsyncBurstResult{}, err
	}
	defer c.close()
	nonce := newNonce()
	res := AsyncBurstResult{Site: site, Rate: rate, IDs: map[string]string{}, Nonce: nonce}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	sctx, cancel := context.WithDeadline(ctx, end.Add(deadline))
	defer cancel()
	// open loop: submission n is due at start + n/rate, sent late (at
	// once) when the machine fell behind, so that a starved process still
	// submits rate x d
	total := int(rate * d.Seconds())
	for n := range total {
		key, tenant := fmt.Sprintf("chaos-%s-%d", nonce, n), fmt.Sprintf("tenant-%d", n%asyncTenants)
		res.Submitted++
		wg.Go(func() {
			id, resends, err := c.submit(sctx, key, tenant)
			mu.Lock()
			defer mu.Unlock()
			res.Resends += resends
			if err != nil {
				res.GaveUp++
				res.GaveUpKeys = append(res.GaveUpKeys, key)
				return
			}
			res.Accepted++
			res.IDs[key] = id
		})
		t := time.NewTimer(time.Until(start.Add(time.Duration(float64(n+1) / rate * float64(time.Second)))))
		select {
		case <-ctx.Done():
			t.Stop()
			wg.Wait()
			return res, ctx.Err()
		case <-t.C:
		}
	}
	wg.Wait()
	return res, nil
}

// handleAsyncBurst serves POST
// /v1/fault/async?site=a&rate=R&duration=D[&deadline=D2].
func (s *System) handleAsyncBurst(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	rate, err1 := strconv.ParseFloat(q.Get("rate"), 64)
	d, err2 := time.ParseDuration(q.Get("duration"))
	deadline := 2*s.cfg.RestartAfter + 30*time.Second
	var err3 error
	if v := q.Get("deadline"); v != "" {
		deadline, err3 = time.ParseDuration(v)
	}
	if err := errors.Join(err1, err2, err3); err != nil {
		http.Error(w, "rate (submissions/s) and duration (e.g. 10s) required, deadline optional: "+err.Error(), http.StatusBadRequest)
		return
	}
	site := q.Get("site")
	if site == "" {
		site = "a"
	}
	res, err := s.AsyncBurst(r.Context(), site, rate, d, deadline)
	if err != nil {
		code := http.StatusBadRequest
		if errors.Is(err, errClosed) {
			code = http.StatusServiceUnavailable
		}
		http.Error(w, err.Error(), code)
		return
	}
	writeJSONResponse(w, res)
}

// readRuns asks one backend for the runs after seq.
func readRuns(ctx context.Context, addr string, after uint64) (Runs, error) {
	var out Runs
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s%s?after=%d", addr, PathRuns, after), nil)
	if err != nil {
		return out, err
	}
	resp, err := slowClient.Do(req)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return out, fmt.Errorf("%s%s: %s: %s", addr, PathRuns, resp.Status, bytes.TrimSpace(b))
	}
	return out, json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&out)
}
