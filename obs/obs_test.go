package obs_test

import (
	"bytes"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/internal/metrictest"
	"github.com/veerhq/veer/obs"
)

func TestRegisterIsIdempotent(t *testing.T) {
	reg := prometheus.NewRegistry()
	newVec := func() *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "veer_test_events_total", Help: "h"}, []string{"kind"})
	}
	a := obs.Register(reg, newVec())
	b := obs.Register(reg, newVec())
	if a != b {
		t.Fatal("second registration did not return the first collector")
	}
	a.WithLabelValues("x").Inc()
	b.WithLabelValues("x").Inc()
	if v := metrictest.Sum(t, reg, "veer_test_events_total", nil); v != 2 {
		t.Fatalf("shared counter = %v, want 2", v)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("conflicting registration did not panic")
		}
	}()
	obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "veer_test_events_total", Help: "h"}, []string{"other"}))
}

func TestCheckName(t *testing.T) {
	good := []string{"veer_shed_requests_total", "veer_failover_state", "veer_shed_queue_wait_seconds", "veer_limit_keys"}
	bad := []string{"shed_requests_total", "veer_requests", "veer_shed_Requests_total", "veer_shed_latency", "veer-shed_x_total"}
	for _, n := range good {
		if err := obs.CheckName(n); err != nil {
			t.Errorf("CheckName(%q) = %v", n, err)
		}
	}
	for _, n := range bad {
		if err := obs.CheckName(n); err == nil {
			t.Errorf("CheckName(%q) accepted", n)
		}
	}
}

func TestLint(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "veer_x_ok_total", Help: "h"}))
	bad := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "veer_x_latency", Help: "h"}, []string{"tenant"})
	bad.WithLabelValues("acme").Set(1)
	reg.MustRegister(bad)
	errs := obs.Lint(reg)
	if len(errs) != 2 {
		t.Fatalf("Lint found %d problems, want 2 (unit-less name, tenant label): %v", len(errs), errs)
	}
}

func TestLoggerFormatsAndHandler(t *testing.T) {
	var buf bytes.Buffer
	l, err := obs.NewLogger(&buf, "json", "warn")
	if err != nil {
		t.Fatal(err)
	}
	l.Info("hidden")
	l.Warn("shown", "k", 1)
	if s := buf.String(); strings.Contains(s, "hidden") || !strings.Contains(s, `"msg":"shown"`) {
		t.Fatalf("json logger wrote %q", s)
	}
	if _, err := obs.NewLogger(io.Discard, "xml", ""); err == nil {
		t.Fatal("unknown format accepted")
	}
	if _, err := obs.NewLogger(io.Discard, "text", "loud"); err == nil {
		t.Fatal("unknown level accepted")
	}

	reg := obs.NewRegistry()
	rec := httptest.NewRecorder()
	obs.Handler(reg).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "go_goroutines") {
		t.Fatalf("/metrics: %d %.200s", rec.Code, rec.Body.String())
	}
}
