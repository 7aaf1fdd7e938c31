package up

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/veerhq/veer/outcome"
	"github.com/veerhq/veer/tier"
)

// Bounds of POST /v1/fault/overload.
const (
	MaxOverloadRate     = 20000
	MaxOverloadDuration = 60 * time.Second
	// overloadCriticalShare of the flood on /api/feed is tagged critical
	// (seed 001's two callers: one critical, one not).
	overloadCriticalShare = 0.1
	// overloadNeighbourRate is the critical /api/trips stream beside the
	// flood (seed 001's isolation test: 10 RPS beside a 1200 RPS spike).
	overloadNeighbourRate = 20
	overloadMaxInFlight   = 8192
)

// StreamResult is one stream of the overload generator: its counts and the
// latency of its served requests, measured from the intended send time
// (open loop: a slow server cannot slow the generator down).
type StreamResult struct {
	Path   string        `json:"path"`
	Tier   string        `json:"tier"`
	Counts Counts        `json:"counts"`
	P50    time.Duration `json:"p50"`
	P99    time.Duration `json:"p99"`
	// Missed counts sends the in-flight bound refused (counted as Fail).
	Missed int64 `json:"missed"`
}

// OverloadResult is what POST /v1/fault/overload measured.
type OverloadResult struct {
	Site     string         `json:"site"`
	Rate     float64        `json:"rate"`
	Duration time.Duration  `json:"duration"`
	Streams  []StreamResult `json:"streams"`
}

type stream struct {
	path string
	tr   tier.Tier
	mu   sync.Mutex
	c    Counts
	lat  []time.Duration
	miss int64
}

func (st *stream) result() StreamResult {
	st.mu.Lock()
	defer st.mu.Unlock()
	r := StreamResult{Path: st.path, Tier: st.tr.String(), Counts: st.c, Missed: st.miss}
	if len(st.lat) > 0 {
		l := slices.Clone(st.lat)
		slices.Sort(l)
		q := func(p float64) time.Duration { return l[min(len(l)-1, int(p*float64(len(l))))] }
		r.P50, r.P99 = q(0.50), q(0.99)
	}
	return r
}

// Overload floods site's gateway for d: rate requests/s to /api/feed
// (overloadCriticalShare of them critical, the rest sheddable) beside a
// critical /api/trips stream at overloadNeighbourRate, open loop, over
// HTTP/2 with the local CA, each request bounded by the request timeout.
func (s *System) Overload(ctx context.Context, site string, rate float64, d time.Duration) (OverloadResult, error) {
	ip := map[string]string{"a": siteAIP, "b": siteBIP}[site]
	if ip == "" || !(rate >= 1 && rate <= MaxOverloadRate) || d <= 0 || d > MaxOverloadDuration {
		return OverloadResult{}, fmt.Errorf("up: overload: site a or b, rate 1..%d, duration up to %v", MaxOverloadRate, MaxOverloadDuration)
	}
	if s.env == nil {
		return OverloadResult{}, errClosed
	}
	tr, host, _, err := s.siteTransport(site, 64)
	if err != nil {
		return OverloadResult{}, err
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: &tier.Transport{Next: tr, Self: "veer-up-overload"}}
	feedCrit := &stream{path: PathFeed, tr: tier.Critical}
	feedShed := &stream{path: PathFeed, tr: tier.Sheddable}
	trips := &stream{path: PathTrips, tr: tier.Critical}
	var wg sync.WaitGroup
	sem := make(chan struct{}, overloadMaxInFlight)
	send := func(st *stream, intended time.Time) {
		select {
		case sem <- struct{}{}:
		default:
			st.mu.Lock()
			st.miss++
			st.c.Fail++
			st.mu.Unlock()
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			rctx, cancel := context.WithTimeout(tier.WithTier(ctx, st.tr), s.cfg.RequestTimeout)
			defer cancel()
			req, err := http.NewRequestWithContext(rctx, http.MethodGet, "https://"+host+st.path, nil)
			if err != nil {
				return
			}
			resp, err := client.Do(req)
			r := resultFail
			if err == nil {
				_, rerr := io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
				resp.Body.Close()
				o := outcome.Classify(resp, nil)
				switch {
				case rerr == nil && resp.StatusCode/100 == 2:
					r = resultOK
				case o.Kind == outcome.Overloaded || o.Kind == outcome.Limited:
					r = resultShed
				}
			}
			if ctx.Err() != nil {
				return
			}
			lat := time.Since(intended)
			st.mu.Lock()
			st.c.add(r)
			if r == resultOK {
				st.lat = append(st.lat, lat)
			}
			st.mu.Unlock()
		}()
	}
	start := time.Now()
	end := start.Add(d)
	// one schedule for both streams: the flood's i-th request is due at
	// start + i/rate, the neighbour's j-th at start + j/neighbourRate
	var i, j int64
	var critAcc float64
	for {
		nf := start.Add(time.Duration(float64(i) * float64(time.Second) / rate))
		nn := start.Add(time.Duration(float64(j) * float64(time.Second) / overloadNeighbourRate))
		next := nf
		if nn.Before(next) {
			next = nn
		}
		if end.Before(next) {
			next = end
		}
		if wait := time.Until(next); wait > 0 {
			if err := sleepCtx(ctx, wait); err != nil {
				break
			}
		}
		if !next.Before(end) {
			break
		}
		if next.Equal(nn) {
			send(trips, nn)
			j++
			continue
		}
		critAcc += overloadCriticalShare
		if critAcc >= 1 {
			critAcc--
			send(feedCrit, nf)
		} else {
			send(feedShed, nf)
		}
		i++
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return OverloadResult{}, err
	}
	return OverloadResult{Site: site, Rate: rate, Duration: d,
		Streams: []StreamResult{feedCrit.result(), feedShed.result(), trips.result()}}, nil
}

// handleOverload is POST /v1/fault/overload?site=a&rate=R&duration=D: it
// answers when the flood has ended, with what it measured.
func (s *System) handleOverload(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	rate, err1 := strconv.ParseFloat(q.Get("rate"), 64)
	d, err2 := time.ParseDuration(q.Get("duration"))
	if err1 != nil || err2 != nil {
		http.Error(w, "rate (requests/s) and duration (e.g. 10s) required", http.StatusBadRequest)
		return
	}
	res, err := s.Overload(r.Context(), cmp.Or(q.Get("site"), "a"), rate, d)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	writeJSONResponse(w, res)
}

// FeedCapacity is the requests/s site a's serving cluster (a1: two
// backends) answers on /api/feed: backends × feed slots / feed latency.
func (c Config) FeedCapacity() float64 {
	c = c.withDefaults()
	return 2 * float64(c.Backend.FeedSlots) / (2 * c.Backend.Latency).Seconds()
}
