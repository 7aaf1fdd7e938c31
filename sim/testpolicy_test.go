package sim

import (
	"time"

	"github.com/veerhq/veer/failover"
	"github.com/veerhq/veer/outcome"
)

// switcher is a test-only policy: after n consecutive network failures it
// moves to the next domain and stays (n = 1 is round-robin). It exists so
// the engine can be tested without depending on the real policies' details.
type switcher struct {
	n, domains int
	dom, fails int
}

var _ failover.Policy = (*switcher)(nil)

func (s *switcher) Start(now time.Time, restored int) failover.Action {
	if restored > 0 {
		s.dom = restored
	}
	return failover.Action{Canary: failover.None}
}
func (s *switcher) Domain() int { return s.dom }
func (s *switcher) State() failover.State {
	if s.dom == 0 {
		return failover.Primary
	}
	return failover.Backup
}
func (s *switcher) Report(now time.Time, d int, o outcome.Outcome) failover.Action {
	a := failover.Action{Canary: failover.None}
	if d != s.dom {
		return a
	}
	if !o.Network() {
		s.fails = 0
		return a
	}
	s.fails++
	if s.fails < s.n {
		return a
	}
	from := s.State()
	s.fails = 0
	s.dom = (s.dom + 1) % s.domains
	a.Transition = failover.Transition{From: from, To: s.State(), Reason: failover.ReasonBaselineSwitch, Domain: s.dom}
	if from == s.State() {
		a.Transition = failover.Transition{}
	}
	return a
}
func (s *switcher) CanaryDone(time.Time, int, outcome.Outcome) failover.Action {
	return failover.Action{Canary: failover.None}
}
func (s *switcher) Tick(time.Time) failover.Action { return failover.Action{Canary: failover.None} }
func (s *switcher) NetworkChanged(time.Time) failover.Action {
	s.fails = 0
	return failover.Action{Canary: failover.None}
}

func switcherStrategy(name string, n int) Strategy {
	return Strategy{Name: name, New: func(_ PolicySpec, domains []string) (failover.Policy, error) {
		return &switcher{n: n, domains: len(domains)}, nil
	}}
}

var testStrategies = []Strategy{switcherStrategy("rr", 1), switcherStrategy("three", 3)}
