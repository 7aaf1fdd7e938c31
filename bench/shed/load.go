package shed

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"

	"github.com/veerhq/veer/shed"
	"github.com/veerhq/veer/tier"
)

// Share is a fraction of a stream's requests sent at a tier.
type Share struct {
	Tier     tier.Tier
	Fraction float64
}

// Stream is one arrival process: open loop at Rate, or closed loop with
// Workers.
type Stream struct {
	Name   string
	Path   string
	Caller string  // Rpc-Caller, if any
	Mix    []Share // tiers of the requests (Veer-Criticality)
	Rate   float64 // requests per second
	// Poisson draws exponential gaps; otherwise arrivals are evenly spaced.
	Poisson bool
	// Workers, when positive, makes the stream closed loop instead: that
	// many workers each send a request as soon as their last one is
	// answered, ignoring Retry-After (hey -c N), until the phase ends.
	// Rate is then ignored, and a sample's At is its actual send time.
	Workers int
	// Timed records when each request was written (Sample.Wrote, from a
	// client trace) in every run; otherwise only SHEDBENCH_SAMPLES runs
	// trace requests.
	Timed bool
}

// Phase is a period of constant offered load.
type Phase struct {
	Name    string
	Dur     time.Duration
	Streams []Stream
	// Measure marks the phase the headline figures are computed over.
	Measure bool
}

// Sample is one request's fate. At is its intended send time since the run
// started; Latency runs from At (not from the actual send) to the response,
// so a server that slows the generator down cannot hide its queue
// (coordinated omission).
type Sample struct {
	Phase   int
	Stream  string
	Tier    tier.Tier
	At      time.Duration
	Latency time.Duration
	Status  int // 0: no response before the client deadline, or a transport error
	// ID is the request's IDHeader value; Wrote is when the request was
	// written to its connection (since At; the generator's own delay), and
	// NewConn whether it needed a new one. Only traced runs set them.
	ID      string
	Wrote   time.Duration
	NewConn bool
	// Body is a 503's body (it names the shed reason).
	Body string
	// Reason is a 503's shed reason header (veer's Veer-Shed-Reason:
	// overload, tier, queue_full, deadline), "" for others.
	Reason string
}

// NewClient returns the generator's HTTP client: a fixed pool of keep-alive
// connections.
func NewClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		MaxConnsPerHost:     conns,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}}
}

// Run offers the phases to base (http://host:port) one after the other and
// returns every request's sample. Each request has the client deadline.
// With trace, requests carry an IDHeader and samples record ID, Wrote and
// NewConn (a client trace per request: only for SHEDBENCH_SAMPLES runs).
//
// Each stream (by name, across phases) is a caller of its own and uses a
// connection pool of its own, a clone of client's transport: a critical
// caller does not wait to dial because 128 storm workers took every idle
// connection of a shared pool (the storm's onset request spent 7-21 ms
// dialling that way, docs/shed.md).
func Run(ctx context.Context, client *http.Client, base string, phases []Phase, deadline time.Duration, seed uint64, trace bool) []Sample {
	var (
		mu      sync.Mutex
		samples []Sample
		wg      sync.WaitGroup
	)
	pools := map[string]*http.Client{}
	for _, ph := range phases {
		for _, st := range ph.Streams {
			if _, ok := pools[st.Name]; ok {
				continue
			}
			pools[st.Name] = client
			if t, ok := client.Transport.(*http.Transport); ok && len(pools) > 1 {
				pools[st.Name] = &http.Client{Transport: t.Clone()}
			}
		}
	}
	defer func() {
		for _, c := range pools {
			if c != client {
				c.CloseIdleConnections()
			}
		}
	}()
	start := time.Now()
	offset := time.Duration(0)
	for pi, ph := range phases {
		var pwg sync.WaitGroup
		for si, st := range ph.Streams {
			client := pools[st.Name]
			rng := rand.New(rand.NewPCG(seed, uint64(pi*100+si)))
			if st.Workers > 0 {
				phaseStart, end := offset, offset+ph.Dur
				for w := range st.Workers {
					wrng := rand.New(rand.NewPCG(seed, uint64(pi*100000+si*1000+w)))
					pwg.Go(func() {
						for ctx.Err() == nil {
							at := time.Since(start)
							if at >= end {
								return
							}
							if at < phaseStart {
								at = phaseStart
							}
							s := do(ctx, client, base, st, pick(st.Mix, wrng.Float64()), start.Add(at), deadline, trace)
							s.Phase, s.At = pi, at
							mu.Lock()
							samples = append(samples, s)
							mu.Unlock()
						}
					})
				}
				continue
			}
			pwg.Go(func() {
				if st.Rate <= 0 {
					return
				}
				at := offset
				end := offset + ph.Dur
				gap := float64(time.Second) / st.Rate
				for at < end {
					if d := time.Until(start.Add(at)); d > 0 {
						select {
						case <-time.After(d):
						case <-ctx.Done():
							return
						}
					}
					tr := pick(st.Mix, rng.Float64())
					intended := at
					wg.Go(func() {
						s := do(ctx, client, base, st, tr, start.Add(intended), deadline, trace)
						s.Phase, s.At = pi, intended
						mu.Lock()
						samples = append(samples, s)
						mu.Unlock()
					})
					if st.Poisson {
						at += time.Duration(rng.ExpFloat64() * gap)
					} else {
						at += time.Duration(gap)
					}
				}
			})
		}
		pwg.Wait()
		offset += ph.Dur
	}
	wg.Wait()
	return samples
}

func pick(mix []Share, u float64) tier.Tier {
	for _, s := range mix {
		if u < s.Fraction {
			return s.Tier
		}
		u -= s.Fraction
	}
	if len(mix) > 0 {
		return mix[len(mix)-1].Tier
	}
	return tier.Unset
}

func do(ctx context.Context, client *http.Client, base string, st Stream, tr tier.Tier, intended time.Time, deadline time.Duration, trace bool) Sample {
	s := Sample{Stream: st.Name, Tier: tr}
	ctx, cancel := context.WithDeadline(ctx, intended.Add(deadline))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+st.Path, nil)
	if err != nil {
		return s
	}
	tier.SetHeader(req.Header, tr, st.Caller)
	// WroteRequest runs on the transport's writing goroutine, which may
	// still be finishing when the response is in.
	var wrote atomic.Int64
	var newConn atomic.Bool
	if trace {
		s.ID = fmt.Sprintf("%s@%d", st.Name, intended.UnixNano())
		req.Header.Set(IDHeader, s.ID)
	}
	if trace || st.Timed {
		req = req.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			GotConn:      func(i httptrace.GotConnInfo) { newConn.Store(!i.Reused) },
			WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Store(int64(time.Since(intended))) },
		}))
	}
	resp, err := client.Do(req)
	if err == nil {
		var body []byte
		if resp.StatusCode == http.StatusServiceUnavailable {
			body, err = io.ReadAll(io.LimitReader(resp.Body, 512))
		}
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body) // drain: the connection is reused
		}
		resp.Body.Close()
		if err == nil {
			s.Status = resp.StatusCode
			s.Body = string(body)
			s.Reason = resp.Header.Get(shed.ReasonHeader)
		}
	}
	s.Wrote, s.NewConn = time.Duration(wrote.Load()), newConn.Load()
	s.Latency = time.Since(intended)
	if s.Latency > deadline {
		s.Status = 0
	}
	return s
}
