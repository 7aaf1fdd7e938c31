package control_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/veerhq/veer/control"
	"github.com/veerhq/veer/obs"
)

// The metrics follow the naming rules and count answers by rule kind only.
func TestMetricsLintAndCount(t *testing.T) {
	reg := obs.NewRegistry()
	e := start(t, control.Config{}, control.Options{Registerer: reg})
	e.waitVersion(e.put(control.KeyTable, table()))
	for _, dev := range []string{"vip-1", "someone"} {
		r, err := http.Post("http://"+e.addrs.Plain+"/v1/route", "application/json", strings.NewReader(`{"device_id":"`+dev+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
	}
	if errs := obs.Lint(reg); len(errs) > 0 {
		t.Fatalf("lint: %v", errs)
	}
	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "veer_control_answers_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	if got["region"] != 1 || got["whitelist"] != 1 || got["bucket"] != 0 || len(got) != 5 {
		t.Fatalf("veer_control_answers_total = %v", got)
	}
}
