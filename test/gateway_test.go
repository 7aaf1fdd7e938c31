package test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/gateway"
	"github.com/veerhq/veer/gateway/gatewayredis"
	"github.com/veerhq/veer/internal/redistest"
	"github.com/veerhq/veer/obs"
)

// Two gateways share a tenant limit through a real redis-server; when Redis
// is killed, each keeps limiting on its own with the limit divided by the
// number of instances (limitredis's fallback), never unlimited.
func TestGatewaySharedLimitsSurviveRedisKill(t *testing.T) {
	rs := redistest.Start(t)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer be.Close()
	yaml := `
listen: {addr: 'off', plain: '127.0.0.1:0'}
routes: [{name: r, clusters: [{name: c}]}]
clusters: [{name: c, backends: [{address: '` + be.Listener.Addr().String() + `'}]}]
limits:
  redis: '` + rs.Addr() + `'
  instances: 2
  keys: ["header:X-Tenant"]
  dimensions: [{name: tenant, default: {rate: 1, burst: 20}}]
`
	var gws []string
	for i := range 2 {
		var cfg gateway.Config
		if err := config.Parse([]byte(yaml), "shared.yaml", &cfg); err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		g, err := gateway.New(cfg, gateway.Options{Logger: obs.Discard, Registerer: reg, SharedLimiter: gatewayredis.SharedLimiter(reg, obs.Discard)})
		if err != nil {
			t.Fatalf("gateway %d: %v", i, err)
		}
		if err := g.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = g.Shutdown(ctx)
		}()
		gws = append(gws, "http://"+g.Addrs().Plain)
	}
	cl := &http.Client{Timeout: 5 * time.Second}
	send := func(base string, n int) (ok int) {
		for range n {
			req, _ := http.NewRequest(http.MethodGet, base+"/", nil)
			req.Header.Set("X-Tenant", "acme")
			resp, err := cl.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			switch resp.StatusCode {
			case 200:
				ok++
			case 429:
			default:
				t.Fatalf("status %d", resp.StatusCode)
			}
		}
		return ok
	}
	start := time.Now()
	shared := send(gws[0], 15) + send(gws[1], 15)
	slack := int(time.Since(start).Seconds()) + 1 // the rate refills 1/s
	if shared < 20 || shared > 20+slack {
		t.Errorf("with Redis: %d of 30 admitted across both gateways, want the shared burst 20 (+%d)", shared, slack)
	}
	rs.Kill()
	start = time.Now()
	a, b := send(gws[0], 20), send(gws[1], 20)
	slack = int(time.Since(start).Seconds()) + 1
	t.Logf("with Redis: %d of 30 admitted; Redis killed: %d and %d of 20 admitted", shared, a, b)
	for i, n := range []int{a, b} {
		if n < 1 || n > 10+slack {
			t.Errorf("Redis killed, gateway %d admitted %d of 20, want the local fallback's burst 20÷2 = 10 (+%d)", i, n, slack)
		}
	}
}
