package limit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/config/watch"
	"github.com/veerhq/veer/internal/metrictest"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/outcome"
	"github.com/veerhq/veer/tier"
)

func TestMiddleware(t *testing.T) {
	l, _ := newTest(t, Config{Dimensions: []Dimension{
		{Name: "tenant", Default: Limits{Rate: 0.5, Burst: 2}},
		{Name: "api", Default: Limits{Concurrency: 10}},
	}})
	h := Middleware(l, HeaderKeys("X-Tenant", ""))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func(tenant string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		req.Header.Set("X-Tenant", tenant)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for i := range 2 {
		resp := get("acme")
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: %d", i, resp.StatusCode)
		}
	}
	resp := get("acme")
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "2" {
		t.Fatalf("got %d Retry-After %q, want 429 and 2 (one token per 2 s)", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	var rej outcome.Rejection
	if err := json.NewDecoder(resp.Body).Decode(&rej); err != nil {
		t.Fatal(err)
	}
	if rej.Reason != "rate limit of tenant" || rej.Error != "limited" {
		t.Fatalf("rejection body %+v", rej)
	}
	other := get("other")
	other.Body.Close()
	if other.StatusCode != 200 {
		t.Fatalf("other tenant: %d", other.StatusCode)
	}
}

func TestBodyLimit(t *testing.T) {
	reg := prometheus.NewRegistry()
	var called, readErr = 0, error(nil)
	h := BodyLimit(1024, reg)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		called++
		_, readErr = io.ReadAll(r.Body)
		if readErr != nil {
			http.Error(w, "too large", http.StatusRequestEntityTooLarge)
			return
		}
		io.WriteString(w, "ok")
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer http.DefaultClient.CloseIdleConnections()

	// Declared too large: 413 before the handler runs.
	resp, err := http.Post(srv.URL, "application/octet-stream", strings.NewReader(strings.Repeat("x", 1<<20)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || called != 0 {
		t.Fatalf("declared 1 MiB: status %d, handler called %d times", resp.StatusCode, called)
	}

	// Chunked, no length: the handler's read stops at the limit.
	pr, pw := io.Pipe()
	go func() {
		chunk := []byte(strings.Repeat("y", 512))
		for range 1 << 12 { // 2 MiB unless the server stops reading
			if _, err := pw.Write(chunk); err != nil {
				return
			}
		}
		pw.Close()
	}()
	req, _ := http.NewRequest(http.MethodPost, srv.URL, pr)
	resp, err = http.DefaultClient.Do(req)
	pr.CloseWithError(errors.New("test done"))
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("chunked: status %d", resp.StatusCode)
		}
	}
	var mbe *http.MaxBytesError
	if !errors.As(readErr, &mbe) {
		t.Fatalf("handler read error %v, want *http.MaxBytesError", readErr)
	}
	if got := metrictest.Sum(t, reg, "veer_limit_body_rejected_total", nil); got != 2 {
		t.Fatalf("body rejections %v, want 2", got)
	}

	// Small body passes.
	resp, err = http.Post(srv.URL, "text/plain", strings.NewReader("small"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("small body: %d", resp.StatusCode)
	}
}

func TestBodyLimitFollowsConfig(t *testing.T) {
	l, _ := newTest(t, Config{MaxRequestBody: 10})
	h := BodyLimitFunc(l.MaxRequestBody, prometheus.NewRegistry())(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	post := func(n int) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", strings.NewReader(strings.Repeat("x", n))))
		return rec.Code
	}
	if post(11) != http.StatusRequestEntityTooLarge || post(10) != http.StatusOK {
		t.Fatal("limit 10 not applied")
	}
	if err := l.Apply(Config{MaxRequestBody: 100}); err != nil {
		t.Fatal(err)
	}
	if post(11) != http.StatusOK || post(101) != http.StatusRequestEntityTooLarge {
		t.Fatal("reloaded limit 100 not applied")
	}
}

func TestResponseLimit(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		big := strings.Repeat("z", 10000)
		if r.URL.Path == "/chunked" {
			io.WriteString(w, big[:5000])
			w.(http.Flusher).Flush()
			io.WriteString(w, big[5000:])
			return
		}
		w.Header().Set("Content-Length", "10000")
		io.WriteString(w, big)
	}))
	defer srv.Close()
	c := &http.Client{Transport: &ResponseLimit{Base: srv.Client().Transport, Max: 4096, Registerer: prometheus.NewRegistry()}}
	if _, err := c.Get(srv.URL + "/declared"); !errors.Is(err, ErrBodyTooLarge) {
		t.Fatalf("declared: err %v", err)
	}
	resp, err := c.Get(srv.URL + "/chunked")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if !errors.Is(err, ErrBodyTooLarge) || len(b) != 4096 {
		t.Fatalf("chunked: read %d bytes, err %v; want 4096 and ErrBodyTooLarge", len(b), err)
	}
}

func TestWatchReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "limits.yaml")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("dimensions:\n  - name: tenant\n    default: {rate: 1, burst: 1}\n")
	l, _ := newTest(t, Config{})
	reg := prometheus.NewRegistry()
	w, err := watch.File(path, watch.Options{Registerer: reg, Logger: obs.Discard, Clock: clock.NewManual(t0)}, l.Apply)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	admitted := func(key string) int {
		n := 0
		for range 10 {
			if r := l.AllowAt(t0, []string{key}); r.Allowed {
				n++
			}
		}
		return n
	}
	if got := admitted("a"); got != 1 {
		t.Fatalf("initial config: admitted %d, want 1", got)
	}
	write("dimensions:\n  - name: tenant\n    default: {rate: 1, burst: 5}\n")
	if err := w.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := admitted("b"); got != 5 {
		t.Fatalf("reloaded config: admitted %d, want 5", got)
	}
	write("dimensions:\n  - name: tenant\n    default: {rate: -1}\n")
	if err := w.Reload(); err == nil {
		t.Fatal("invalid config accepted")
	}
	if got := admitted("c"); got != 5 {
		t.Fatalf("after invalid reload: admitted %d, want 5 (old config kept)", got)
	}
}

// TestMiddlewareBoundsKeys: header keys over MaxKeyLen share one key, so a
// client can neither make huge keys nor leave its dimension by sending one
// (before, an over-long value was ignored and its dimension skipped).
func TestMiddlewareBoundsKeys(t *testing.T) {
	l, _ := newTest(t, Config{Dimensions: []Dimension{{Name: "tenant", Default: Limits{Rate: 0.001, Burst: 1}}}})
	h := Middleware(l, HeaderKeys("X-Tenant"))(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	code := func(tenant string) int {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("X-Tenant", tenant)
		h.ServeHTTP(w, r)
		return w.Code
	}
	if c := code(strings.Repeat("a", MaxKeyLen+1)); c != 200 {
		t.Fatalf("first over-long key: %d", c)
	}
	if c := code(strings.Repeat("b", MaxKeyLen+1)); c != 429 {
		t.Fatalf("second over-long key: %d, want 429 (one shared key)", c)
	}
	if c := code(strings.Repeat("c", MaxKeyLen)); c != 200 {
		t.Fatalf("key of MaxKeyLen bytes: %d, want its own bucket", c)
	}
}

// TestRejectedByTier: a rejection is counted under the tier the request
// carries (AdmitHTTP: its context; AdmitHTTPAs: the one named), "unset"
// without one; the label has only the five tier values.
func TestRejectedByTier(t *testing.T) {
	l, reg := newTest(t, Config{Dimensions: []Dimension{
		{Name: "tenant", Default: Limits{Rate: 1, Burst: 1}},
		{Name: "api", Default: Limits{Concurrency: 1}},
	}})
	steps := []struct {
		name   string
		keys   []string
		stated tier.Tier // on the context (AdmitHTTP)
		as     tier.Tier // named (AdmitHTTPAs); Unset: AdmitHTTP
		ok     bool
	}{
		{"first of acme passes", []string{"acme", ""}, tier.Unset, tier.Unset, true},
		{"second of acme, no tier", []string{"acme", ""}, tier.Unset, tier.Unset, false},
		{"acme, critical on the context", []string{"acme", ""}, tier.Critical, tier.Unset, false},
		{"acme, sheddable named", []string{"acme", ""}, tier.Unset, tier.Sheddable, false},
		{"acme, named wins over the context", []string{"acme", ""}, tier.Critical, tier.Sheddable, false},
	}
	for _, s := range steps {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if s.stated != tier.Unset {
			r = r.WithContext(tier.WithTier(r.Context(), s.stated))
		}
		w := httptest.NewRecorder()
		var ok bool
		var res Result
		if s.as != tier.Unset {
			res, ok = AdmitHTTPAs(l, w, r, slices.Clone(s.keys), s.as)
		} else {
			res, ok = AdmitHTTP(l, w, r, slices.Clone(s.keys))
		}
		if ok != s.ok {
			t.Fatalf("%s: admitted %v, want %v", s.name, ok, s.ok)
		}
		if ok {
			res.Permit.Release()
		} else if w.Code != http.StatusTooManyRequests {
			t.Fatalf("%s: status %d, want 429", s.name, w.Code)
		}
	}
	// another Admitter (here the limiter behind an interface it does not
	// see through) gets the named tier in the context
	if _, ok := AdmitHTTPAs(otherAdmitter{l}, httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil), []string{"acme", ""}, tier.SheddablePlus); ok {
		t.Fatal("acme admitted past its rate through another Admitter")
	}
	// a concurrency rejection under its tier
	held, _ := AdmitHTTP(l, httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil), []string{"", "x"})
	if _, ok := AdmitHTTPAs(l, httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil), []string{"", "x"}, tier.CriticalPlus); ok {
		t.Fatal("second request in flight admitted past concurrency 1")
	}
	held.Permit.Release()
	for _, w := range []struct {
		dim, reason, tier string
		n                 float64
	}{
		{"tenant", "rate", "unset", 1}, {"tenant", "rate", "critical", 1}, {"tenant", "rate", "sheddable", 2},
		{"tenant", "rate", "critical_plus", 0}, {"tenant", "rate", "sheddable_plus", 1},
		{"api", "concurrency", "critical_plus", 1}, {"api", "concurrency", "unset", 0},
	} {
		if got := metrictest.Sum(t, reg, "veer_limit_rejected_total", map[string]string{"dimension": w.dim, "reason": w.reason, "tier": w.tier}); got != w.n {
			t.Errorf("rejected{%s,%s,%s} = %v, want %v", w.dim, w.reason, w.tier, got, w.n)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	tiers := map[string]bool{}
	for _, mf := range mfs {
		if mf.GetName() != "veer_limit_rejected_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "tier" {
					tiers[lp.GetValue()] = true
				}
			}
		}
	}
	if want := []string{"critical", "critical_plus", "sheddable", "sheddable_plus", "unset"}; !slices.Equal(slices.Sorted(maps.Keys(tiers)), want) {
		t.Errorf("tier label values %v, want %v", slices.Sorted(maps.Keys(tiers)), want)
	}
}

// otherAdmitter hides a *Limiter behind the Admitter interface.
type otherAdmitter struct{ l *Limiter }

func (o otherAdmitter) Admit(ctx context.Context, keys []string) Result { return o.l.Admit(ctx, keys) }

// BenchmarkAdmitHTTP: the admission of one request with its tier unset
// (AdmitHTTP) and named (AdmitHTTPAs: one context value more).
func BenchmarkAdmitHTTP(b *testing.B) {
	l, _ := newTest(b, Config{Dimensions: []Dimension{{Name: "tenant", Default: Limits{Rate: 1e9, Burst: 1e9}}}})
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	w := httptest.NewRecorder()
	keys := make([]string, 1)
	for _, c := range []struct {
		name string
		t    tier.Tier
	}{{"unset", tier.Unset}, {"tier", tier.Critical}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				keys[0] = "acme"
				res, ok := AdmitHTTPAs(l, w, r, keys, c.t)
				if !ok {
					b.Fatal("refused")
				}
				res.Permit.Release()
			}
		})
	}
}

// A refusal counted under the tier the caller resolved for the request
// (the gateway: the one shedding would give it).
func ExampleAdmitHTTPAs() {
	reg := prometheus.NewRegistry()
	l, _ := New(Config{Dimensions: []Dimension{{Name: "tenant", Default: Limits{Rate: 1, Burst: 1}}}},
		Options{Clock: clock.NewManual(t0), Registerer: reg})
	for range 2 {
		w := httptest.NewRecorder()
		res, ok := AdmitHTTPAs(l, w, httptest.NewRequest(http.MethodGet, "/", nil), []string{"acme"}, tier.Critical)
		if ok {
			res.Permit.Release()
		}
		fmt.Println(w.Code, ok)
	}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "veer_limit_rejected_total" {
			for _, m := range mf.GetMetric() {
				if m.GetCounter().GetValue() > 0 {
					for _, lp := range m.GetLabel() {
						fmt.Print(lp.GetName(), "=", lp.GetValue(), " ")
					}
					fmt.Println(m.GetCounter().GetValue())
				}
			}
		}
	}
	// Output:
	// 200 true
	// 429 false
	// dimension=tenant reason=rate tier=critical 1
}
