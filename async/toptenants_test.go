package async

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/veerhq/veer/obs"
)

// tenantValues returns the distinct tenant label values of the family name.
func tenantValues(t *testing.T, reg *prometheus.Registry, name string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "tenant" {
					out[lp.GetValue()] += value(m)
				}
			}
		}
	}
	return out
}

func value(m *dto.Metric) float64 {
	if c := m.GetCounter(); c != nil {
		return c.GetValue()
	}
	return float64(m.GetHistogram().GetSampleCount())
}

// TestTenantLabelBounded: 10 000 tenants submit (five heavy ones 12 times
// as often as the rest, interleaved) and succeed; at every check and at
// the end each veer_async_tenant_* family carries at most N+1 tenant
// values, the five heavy tenants are named, the light tenants' submissions
// are counted under "other", and the metric lint passes with the one
// bounded form it allows. The metrics are driven as the service drives
// them (submitted, then use on success); TestTenantLabelService runs the
// same through a Service.
func TestTenantLabelBounded(t *testing.T) {
	const n = 10
	reg := prometheus.NewRegistry()
	m := newMetrics(reg, n)
	heavy := []string{"h0", "h1", "h2", "h3", "h4"}
	total := 0
	submit := func(tenant string) {
		m.submitted(tenant, nil, false, time.Millisecond)
		m.top.use(tenant, func(l string) { m.tenantE2E.WithLabelValues(l).Observe(0.5) })
		total++
	}
	check := func() {
		t.Helper()
		for _, name := range []string{"veer_async_tenant_submissions_total", "veer_async_tenant_end_to_end_seconds"} {
			if vs := tenantValues(t, reg, name); len(vs) > n+1 {
				t.Fatalf("%s: %d tenant values (> %d+1): %v", name, len(vs), n, vs)
			}
		}
	}
	for i := range 10_000 {
		submit(fmt.Sprintf("light-%d", i))
		if i%10 == 0 {
			for _, h := range heavy {
				for range 12 {
					submit(h)
				}
			}
		}
		if i%250 == 0 {
			check()
		}
	}
	check()
	subs := tenantValues(t, reg, "veer_async_tenant_submissions_total")
	for _, h := range heavy {
		if subs[h] == 0 {
			t.Errorf("heavy tenant %s not named: %v", h, subs)
		}
	}
	var sum float64
	for _, v := range subs {
		sum += v
	}
	// a tenant that leaves the named set loses its series (its counts so
	// far go with it), so the sum is at most the total
	if sum > float64(total) || subs[OtherTenant] < 9_000 {
		t.Fatalf("named + other = %.0f of %d accepted; other %.0f", sum, total, subs[OtherTenant])
	}
	if errs := obs.Lint(reg); len(errs) > 0 {
		t.Fatalf("lint: %v", errs)
	}
}

// TestTenantLabelService: through a Service (memory engine), 200 tenants'
// invocations submitted and run leave at most MetricTenants+1 tenant
// values on both families, and the busiest tenant is named.
func TestTenantLabelService(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		ok := DispatcherFunc(func(ctx context.Context, req *http.Request, inv *Invocation) (*http.Response, error) {
			return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody}, nil
		})
		s, err := New(Config{MetricTenants: 3}, newMemEngine(), ok, Options{Logger: obs.Discard, Registerer: reg})
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
		defer s.Close()
		for i := range 200 {
			for _, tn := range []string{fmt.Sprint("t", i), "busy"} {
				if _, _, err := s.Submit(context.Background(), &Invocation{Tenant: tn, Method: "POST", Host: "h", Path: "/"}); err != nil {
					t.Fatal(err)
				}
			}
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		for _, name := range []string{"veer_async_tenant_submissions_total", "veer_async_tenant_end_to_end_seconds"} {
			vs := tenantValues(t, reg, name)
			if len(vs) > 4 || vs["busy"] == 0 {
				t.Fatalf("%s: %v: want at most 4 values, busy named", name, vs)
			}
		}
		if errs := obs.Lint(reg); len(errs) > 0 {
			t.Fatalf("lint: %v", errs)
		}
	})
}

// TestTopTenantsSteps: the named set as a step table (N = 2, rerank every
// 100 observations): free places are filled by the first tenants, a
// heavier newcomer replaces the lightest named tenant at the next rerank,
// and a tenant called "other" is never named.
func TestTopTenantsSteps(t *testing.T) {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "veer_async_x_total", Help: "x"}, []string{"tenant"})
	top := newTopTenants(2, vec)
	steps := []struct {
		tenant string
		times  int
		want   string // the label of tenant after the step
	}{
		{"a", 1, "a"},
		{"other", 1, OtherTenant},
		{"b", 1, "b"},
		{"c", 1, OtherTenant}, // both places taken
		{"c", 60, OtherTenant},
		{"a", 10, "a"},
		{"c", 30, "c"}, // 101 observations: rerank; c (91) and a (11) beat b (1)
		{"b", 1, OtherTenant},
	}
	for i, st := range steps {
		var got string
		for range st.times {
			top.observe(st.tenant, func(l string) { got = l; vec.WithLabelValues(l).Inc() })
		}
		if got != st.want {
			t.Fatalf("step %d (%s ×%d): label %q, want %q", i, st.tenant, st.times, got, st.want)
		}
	}
	if n := testutilCount(vec); n > 3 {
		t.Fatalf("%d series, want at most 3", n)
	}
}

func testutilCount(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric, 100)
	c.Collect(ch)
	close(ch)
	n := 0
	for range ch {
		n++
	}
	return n
}
