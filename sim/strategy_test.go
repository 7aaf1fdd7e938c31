package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func TestStrategiesDiffer(t *testing.T) {
	// The headline of seed 000 at small scale, with wide margins: the
	// Uber policy keeps traffic on primary, round-robin does not.
	sc := Default()
	res, err := Run(context.Background(), &sc, Strategies(), Options{Sessions: 500})
	if err != nil {
		t.Fatal(err)
	}
	u, rr := res.Strategies["uber"], res.Strategies["roundrobin"]
	if u.PrimaryShare < 0.95 || rr.PrimaryShare > 0.8 {
		t.Errorf("primary share: uber %v, roundrobin %v", u.PrimaryShare, rr.PrimaryShare)
	}
	if u.FailoversPerSession.Mean >= rr.FailoversPerSession.Mean {
		t.Errorf("failovers: uber %v >= roundrobin %v", u.FailoversPerSession.Mean, rr.FailoversPerSession.Mean)
	}
	if u.Transitions["failover>backup:canary_success"] == 0 || u.Transitions["primary>failover:failures"] == 0 {
		t.Errorf("uber transitions %v", u.Transitions)
	}
	for k := range rr.Transitions {
		if !strings.HasSuffix(k, ":baseline_switch") && !strings.HasSuffix(k, ":restored") {
			t.Errorf("roundrobin transition %s", k)
		}
	}
	if u.CanariesPerSession == 0 || rr.CanariesPerSession != 0 {
		t.Errorf("canaries: uber %v, roundrobin %v", u.CanariesPerSession, rr.CanariesPerSession)
	}
	// ConfirmPrimary removes most BACKUP stints that the user's own
	// network caused (no domain fails in this scenario): measured 99.9%
	// against 98.4% and 0.06 against 0.76 failovers per session at 5,000
	// sessions; the margins here are wide.
	uc := res.Strategies["uber-confirm"]
	if uc.PrimaryShare <= u.PrimaryShare || uc.PrimaryShare < 0.99 {
		t.Errorf("primary share: uber-confirm %v, uber %v", uc.PrimaryShare, u.PrimaryShare)
	}
	if uc.FailoversPerSession.Mean*3 > u.FailoversPerSession.Mean {
		t.Errorf("failovers: uber-confirm %v, uber %v", uc.FailoversPerSession.Mean, u.FailoversPerSession.Mean)
	}
	if uc.Transitions["failover>primary:primary_confirmed"] == 0 || u.Transitions["failover>primary:primary_confirmed"] != 0 {
		t.Errorf("primary_confirmed: uber-confirm %v, uber %v", uc.Transitions, u.Transitions)
	}
}

func TestRegionalOutageDetectedAndRecovered(t *testing.T) {
	sc, err := LoadBundled("regional")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), sc, []Strategy{Uber, UberConfirm}, Options{Sessions: 400})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range res.Order {
		u := res.Strategies[name]
		// a real outage still ends in BACKUP under ConfirmPrimary
		if u.Detected == 0 || u.Recovered == 0 || u.PrimaryShare > 0.95 {
			t.Errorf("%s: detected %d, recovered %d, primary share %v", name, u.Detected, u.Recovered, u.PrimaryShare)
		}
	}
	u := res.Strategies["uber"]
	if u.Detected == 0 || u.Recovered == 0 || u.DetectSeconds == nil || u.RecoverSeconds == nil {
		t.Fatalf("detected %d, recovered %d", u.Detected, u.Recovered)
	}
	fg := res.Strategies["uber"].ByClass["foreground"]
	if fg.DetectSeconds == nil || *fg.DetectSeconds > 20 {
		t.Errorf("foreground detection median %v s, want well under 20 s", fg.DetectSeconds)
	}
	// Only east is affected.
	if u.PrimaryShare > 0.95 {
		t.Errorf("primary share %v during a regional outage", u.PrimaryShare)
	}
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(res); err != nil {
		t.Fatal(err)
	}
}
