package gatewayredis_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/gateway"
	"github.com/veerhq/veer/gateway/gatewayredis"
	"github.com/veerhq/veer/gateway/gatewaytest"
	"github.com/veerhq/veer/internal/redistest"
	"github.com/veerhq/veer/obs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// start runs a gateway whose limits are shared through the Redis at addr.
func start(t *testing.T, backend, redisAddr string) string {
	t.Helper()
	var cfg gateway.Config
	yaml := `
listen: {addr: "off", plain: "127.0.0.1:0"}
routes: [{name: r, clusters: [{name: c}]}]
clusters: [{name: c, backends: [{address: "` + backend + `"}]}]
limits:
  redis: "` + redisAddr + `"
  instances: 2
  keys: [route]
  dimensions: [{name: route, default: {rate: 0.001, burst: 4}}]
`
	if err := config.Parse([]byte(yaml), "gw.yaml", &cfg); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	g := gatewaytest.Start(t, cfg, gateway.Options{Registerer: reg, Gatherer: reg,
		SharedLimiter: gatewayredis.SharedLimiter(reg, obs.Discard)})
	return "http://" + g.Addrs().Plain
}

func status(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestSharedLimitsAcrossGateways: two gateways share one real redis-server:
// a route's burst of 4 is spent by both together, not 4 each. With Redis
// killed, each decides alone with the limit divided by instances (2 of the
// new burst each): still limited, never unlimited.
func TestSharedLimitsAcrossGateways(t *testing.T) {
	srv := redistest.Start(t)
	be := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(be.Close)
	backend := be.Listener.Addr().String()
	g1, g2 := start(t, backend, srv.Addr()), start(t, backend, srv.Addr())
	var codes []int
	for _, base := range []string{g1, g2, g1, g2, g1, g2} {
		codes = append(codes, status(t, base+"/"))
	}
	want := []int{200, 200, 200, 200, 429, 429}
	for i := range want {
		if codes[i] != want[i] {
			t.Fatalf("through both gateways: %v, want %v (one shared burst of 4)", codes, want)
		}
	}
	srv.Kill()
	// Fallback: each gateway alone, burst 4 / 2 instances = 2, its own
	// fresh local bucket: two more each, then limited.
	for _, base := range []string{g1, g2} {
		got := []int{status(t, base+"/"), status(t, base+"/"), status(t, base+"/")}
		if got[0] != 200 || got[1] != 200 || got[2] != 429 {
			t.Fatalf("%s with Redis down: %v, want 200s then 429 (local limit = limit / instances)", base, got)
		}
	}
}
