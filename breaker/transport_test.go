package breaker

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/internal/must"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/outcome"
)

func TestTransport(t *testing.T) {
	status := http.StatusInternalServerError
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		w.WriteHeader(status)
		io.WriteString(w, "x")
	}))
	defer srv.Close()
	b := must.Get(New(Config{MinRequests: 5, Levels: []Level{{FailureRatio: 0.9, Admit: 0}}}, Options{Registerer: prometheus.NewRegistry(), Logger: obs.Discard}))
	c := &http.Client{Transport: &Transport{Next: srv.Client().Transport, Breaker: b}}
	get := func() (*http.Response, error) {
		resp, err := c.Get(srv.URL)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return resp, err
	}
	// 404s are the dependency working: counted as successes.
	status = http.StatusNotFound
	for range 10 {
		if _, err := get(); err != nil {
			t.Fatal(err)
		}
	}
	if st := b.Status(); st.State != Closed || st.Requests != 10 || st.Failures != 0 {
		t.Fatalf("after ten 404s: %+v", st)
	}
	// A fresh breaker sees five 500s: 100 % failures, open.
	b = must.Get(New(Config{MinRequests: 5, Levels: []Level{{FailureRatio: 0.9, Admit: 0}}}, Options{Registerer: prometheus.NewRegistry(), Logger: obs.Discard}))
	c.Transport.(*Transport).Breaker = b
	status = http.StatusInternalServerError
	for range 5 {
		if _, err := get(); err != nil {
			t.Fatal(err)
		}
	}
	before := calls
	_, err := get()
	if !errors.Is(err, ErrOpen) || outcome.ClassifyError(err) != outcome.Overloaded {
		t.Fatalf("err %v (kind %v), want ErrOpen classified as overloaded", err, outcome.ClassifyError(err))
	}
	if calls != before {
		t.Fatal("a rejected request reached the server")
	}
}
