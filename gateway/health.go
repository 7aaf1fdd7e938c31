package gateway

import (
	"context"
	"io"
	"net/http"
	"sync"
	"time"
)

// healthChecks runs the active checks of one snapshot: one goroutine per
// cluster with a health path, checking its backends every interval.
type healthChecks struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startHealth(g *Gateway, t *table) *healthChecks {
	ctx, cancel := context.WithCancel(context.Background())
	h := &healthChecks{cancel: cancel}
	for _, c := range t.clusters {
		g.publishBackends(c)
		if c.cfg.Health.Path == "" {
			continue
		}
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			g.checkLoop(ctx, c)
		}()
	}
	return h
}

func (h *healthChecks) stop() {
	h.cancel()
	h.wg.Wait()
}

// checkLoop checks each backend of c in its own loop: every Interval
// while it is usable, every UnhealthyInterval while it is down or ejected
// (a slow probe of one backend delays no other).
func (g *Gateway) checkLoop(ctx context.Context, c *cluster) {
	hc := c.cfg.Health
	client := &http.Client{Transport: c.transport, Timeout: hc.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	var wg sync.WaitGroup
	for _, b := range c.backends {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.checkBackend(ctx, c, b, client)
		}()
	}
	wg.Wait()
}

func (g *Gateway) checkBackend(ctx context.Context, c *cluster, b *backend, client *http.Client) {
	hc := c.cfg.Health
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ok := probe(ctx, client, c.scheme()+"://"+b.addr+hc.Path)
		if ctx.Err() != nil {
			return
		}
		now := time.Now()
		if ok {
			b.checkedOK.Store(now.UnixNano()) // ends a stall with nothing outstanding (see stalled)
		}
		changed, readmitted := b.setCheck(now, ok, hc.Rise, hc.Fall)
		switch {
		case changed:
			state := "up"
			if !ok {
				state = "down"
			}
			g.log.Warn("backend health changed", "cluster", c.cfg.Name, "backend", b.addr, "state", state)
		case readmitted:
			g.log.Warn("backend readmitted: health checks failed during its ejection, then passed", "cluster", c.cfg.Name, "backend", b.addr)
		}
		g.publishBackends(c)
		next := hc.Interval
		if !b.usable(now.UnixNano(), false) || b.stalledAt.Load() != 0 {
			next = hc.UnhealthyInterval
		}
		t.Reset(next)
	}
}

// probe reports whether GET url answers 2xx or 3xx.
func probe(ctx context.Context, client *http.Client, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	req.Header.Set("User-Agent", "veer-gateway-health")
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
	_ = resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 400
}

// publishBackends refreshes the per-backend gauges of c.
func (g *Gateway) publishBackends(c *cluster) {
	now := time.Now().UnixNano()
	for _, b := range c.backends {
		v := 0.0
		if b.usable(now, false) {
			v = 1
		}
		g.m.backendUp.WithLabelValues(c.cfg.Name, b.addr).Set(v)
	}
	if c.breaker != nil {
		c.m.breaker.Set(float64(c.breaker.Status().State))
	}
}
