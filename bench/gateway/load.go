package gateway

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/quic-go/quic-go/http3"
)

// Client returns a client for proto "h1" (plain HTTP/1.1 keep-alive), "h2"
// (HTTP/2 over TLS) or "h3" (HTTP/3), with conns connections at most.
func Client(proto string, conns int) *http.Client {
	tlsConf := &tls.Config{InsecureSkipVerify: true} // the contenders' self-signed certificates
	switch proto {
	case "h2":
		return &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConf, ForceAttemptHTTP2: true, MaxIdleConnsPerHost: conns}}
	case "h3":
		return &http.Client{Transport: &http3.Transport{TLSClientConfig: tlsConf}}
	default:
		return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns, DisableCompression: true}}
	}
}

// Result of one load run.
type Result struct {
	Requests, Errors int
	// Total counts the warm-up too: CPU time is read around the whole run.
	Total     int
	Elapsed   time.Duration
	Latencies []time.Duration // sorted
}

// Quantile returns the q-quantile of the latencies.
func (r Result) Quantile(q float64) time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	return r.Latencies[min(len(r.Latencies)-1, int(q*float64(len(r.Latencies))))]
}

// Run sends GET url from c closed-loop workers for d and records every
// latency. The first warm of d/5 is not counted.
func Run(ctx context.Context, cl *http.Client, url string, c int, d time.Duration) Result {
	warm := d / 5
	start := time.Now()
	end := start.Add(warm + d)
	var mu sync.Mutex
	var res Result
	var wg sync.WaitGroup
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lat []time.Duration
			var n, errs, total int
			for {
				t0 := time.Now()
				if t0.After(end) || ctx.Err() != nil {
					break
				}
				resp, err := cl.Get(url)
				ok := err == nil
				if ok {
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
					ok = resp.StatusCode == 200
				}
				total++
				if t0.Sub(start) < warm {
					continue
				}
				n++
				if !ok {
					errs++
					continue
				}
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			res.Requests += n
			res.Errors += errs
			res.Total += total
			res.Latencies = append(res.Latencies, lat...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.Elapsed = d
	slices.Sort(res.Latencies)
	return res
}
