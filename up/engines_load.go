package up

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/veerhq/veer/outcome"
	"github.com/veerhq/veer/tier"
)

// Bounds of POST /v1/fault/limited.
const (
	MaxLimitedRate     = 5000
	MaxLimitedDuration = 60 * time.Second
	limitedMaxInFlight = 2048
)

// LimitedResult is what POST /v1/fault/limited measured: per site's
// gateway, the answers of /api/search (OK admitted, Shed limited with 429
// or shed, Fail anything else).
type LimitedResult struct {
	Rate     float64           `json:"rate"`
	Duration time.Duration     `json:"duration"`
	Sites    map[string]Counts `json:"sites"`
	// Admitted is OK per second over both gateways.
	Admitted float64 `json:"admitted_per_s"`
	// Limited is 429s per second over both gateways.
	Limited float64 `json:"limited_per_s"`
	// Failed counts the failures by kind ("502 server_error",
	// "response_timeout", ...).
	Failed map[string]int64 `json:"failed,omitempty"`
}

// Total sums the sites.
func (r LimitedResult) Total() Counts {
	var t Counts
	for _, c := range r.Sites {
		t.OK += c.OK
		t.Shed += c.Shed
		t.Fail += c.Fail
	}
	return t
}

// siteClient is an HTTP/2 client to site's gateway with the local CA (no
// emulated network: a load generator beside the population).
func (s *System) siteClient(site string) (*http.Client, string, func(), error) {
	tr, host, _, err := s.siteTransport(site, 16)
	if err != nil {
		return nil, "", nil, err
	}
	return &http.Client{Transport: &tier.Transport{Next: tr, Self: "veer-up-limited"}}, host, tr.CloseIdleConnections, nil
}

// LimitedLoad sends rate requests/s to /api/search for d, half to each
// site's gateway, open loop (each request at its intended time, whatever
// the answers before it), and counts the answers per gateway.
func (s *System) LimitedLoad(ctx context.Context, rate float64, d time.Duration) (LimitedResult, error) {
	if !(rate >= 1 && rate <= MaxLimitedRate) || d <= 0 || d > MaxLimitedDuration {
		return LimitedResult{}, fmt.Errorf("up: limited load: rate 1..%d, duration up to %v", MaxLimitedRate, MaxLimitedDuration)
	}
	sites := []string{"a", "b"}
	type target struct {
		client *http.Client
		host   string
		mu     sync.Mutex
		c      Counts
		why    map[string]int64
	}
	var ts []*target
	for _, site := range sites {
		cl, host, closeIdle, err := s.siteClient(site)
		if err != nil {
			return LimitedResult{}, err
		}
		defer closeIdle()
		ts = append(ts, &target{client: cl, host: host, why: map[string]int64{}})
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, limitedMaxInFlight)
	send := func(t *target) {
		select {
		case sem <- struct{}{}:
		default:
			t.mu.Lock()
			t.c.Fail++
			t.why["generator in-flight bound"]++
			t.mu.Unlock()
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			rctx, cancel := context.WithTimeout(tier.WithTier(ctx, tier.Critical), s.cfg.RequestTimeout)
			defer cancel()
			req, err := http.NewRequestWithContext(rctx, http.MethodGet, "https://"+t.host+PathSearch, nil)
			if err != nil {
				return
			}
			r, why := resultFail, ""
			resp, err := t.client.Do(req)
			if err != nil {
				why = outcome.Classify(nil, err).Kind.String()
			} else {
				_, rerr := io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
				resp.Body.Close()
				o := outcome.Classify(resp, nil)
				why = fmt.Sprintf("%d %s", resp.StatusCode, o.Kind)
				switch {
				case rerr == nil && resp.StatusCode/100 == 2:
					r = resultOK
				case o.Kind == outcome.Limited || o.Kind == outcome.Overloaded:
					r = resultShed
				}
			}
			if ctx.Err() != nil {
				return
			}
			t.mu.Lock()
			t.c.add(r)
			if r == resultFail {
				t.why[why]++
			}
			t.mu.Unlock()
		}()
	}
	start := time.Now()
	end := start.Add(d)
	for i := int64(0); ; i++ {
		next := start.Add(time.Duration(float64(i) * float64(time.Second) / rate))
		if !next.Before(end) {
			break
		}
		if wait := time.Until(next); wait > 0 {
			if err := sleepCtx(ctx, wait); err != nil {
				break
			}
		}
		send(ts[i%int64(len(ts))])
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return LimitedResult{}, err
	}
	res := LimitedResult{Rate: rate, Duration: d, Sites: map[string]Counts{}, Failed: map[string]int64{}}
	for i, t := range ts {
		res.Sites[sites[i]] = t.c
		for k, n := range t.why {
			res.Failed[sites[i]+": "+k] += n
		}
	}
	tot := res.Total()
	res.Admitted = float64(tot.OK) / d.Seconds()
	res.Limited = float64(tot.Shed) / d.Seconds()
	return res, nil
}

// handleLimited is POST /v1/fault/limited?rate=R&duration=D: it answers
// when the load has ended, with what it measured.
func (s *System) handleLimited(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	rate, err1 := strconv.ParseFloat(q.Get("rate"), 64)
	d, err2 := time.ParseDuration(q.Get("duration"))
	if err1 != nil || err2 != nil {
		http.Error(w, "rate (requests/s) and duration (e.g. 10s) required", http.StatusBadRequest)
		return
	}
	res, err := s.LimitedLoad(r.Context(), rate, d)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	writeJSONResponse(w, res)
}
