package sim

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/veerhq/veer/failover"
	"github.com/veerhq/veer/outcome"
)

// checked wraps a real policy and checks that the simulator keeps the shell
// side of the failover.Policy contract: time never goes backwards, Tick
// comes at (or after) the pending Wake and never without one, a CanaryDone
// answers a requested canary within the canary timeout, and outcomes are
// reported for domains that exist.
type checked struct {
	p        failover.Policy
	fail     func(string)
	now      time.Time
	wake     time.Time
	sent     map[int][]time.Time // canaries awaiting an answer, by domain
	timeout  time.Duration
	domains  int
	answered *int
}

func (c *checked) at(now time.Time, what string) {
	if now.Before(c.now) {
		c.fail(fmt.Sprintf("%s at %v, before %v", what, now, c.now))
	}
	c.now = now
}

func (c *checked) act(now time.Time, a failover.Action) failover.Action {
	if a.Canary != failover.None {
		c.sent[a.Canary] = append(c.sent[a.Canary], now)
	}
	c.wake = a.Wake
	return a
}

func (c *checked) Start(now time.Time, restored int) failover.Action {
	c.at(now, "start")
	return c.act(now, c.p.Start(now, restored))
}
func (c *checked) Domain() int           { return c.p.Domain() }
func (c *checked) State() failover.State { return c.p.State() }
func (c *checked) Report(now time.Time, d int, o outcome.Outcome) failover.Action {
	c.at(now, "report")
	if d < 0 || d >= c.domains {
		c.fail(fmt.Sprintf("report for domain %d", d))
	}
	return c.act(now, c.p.Report(now, d, o))
}
func (c *checked) CanaryDone(now time.Time, d int, o outcome.Outcome) failover.Action {
	c.at(now, "canary")
	q := c.sent[d]
	if len(q) == 0 {
		c.fail(fmt.Sprintf("CanaryDone(%d) without a canary sent", d))
	} else {
		if took := now.Sub(q[0]); took <= 0 || took > c.timeout {
			c.fail(fmt.Sprintf("canary to %d answered after %v (timeout %v)", d, took, c.timeout))
		}
		c.sent[d] = q[1:]
	}
	*c.answered++
	return c.act(now, c.p.CanaryDone(now, d, o))
}
func (c *checked) Tick(now time.Time) failover.Action {
	c.at(now, "tick")
	if c.wake.IsZero() || now.Before(c.wake) {
		c.fail(fmt.Sprintf("Tick at %v with wake %v", now, c.wake))
	}
	return c.act(now, c.p.Tick(now))
}
func (c *checked) NetworkChanged(now time.Time) failover.Action {
	c.at(now, "network changed")
	return c.act(now, c.p.NetworkChanged(now))
}

func TestShellKeepsPolicyContract(t *testing.T) {
	for _, name := range []string{"small-default", "flapping", "fig4"} {
		var sc *Scenario
		if name == "small-default" {
			d := Default()
			sc = &d
		} else {
			var err error
			if sc, err = LoadBundled(name); err != nil {
				t.Fatal(err)
			}
		}
		var mu sync.Mutex
		var errs []string
		answered := 0
		for _, s := range Strategies() {
			inner := s
			wrapped := Strategy{Name: s.Name, New: func(p failover.Config) (failover.Policy, error) {
				pol, err := inner.New(p)
				if err != nil {
					return nil, err
				}
				return &checked{p: pol, sent: map[int][]time.Time{}, timeout: failover.DefaultCanaryTimeout,
					domains: 1 + len(p.Backups), answered: &answered,
					fail: func(m string) {
						mu.Lock()
						errs = append(errs, m)
						mu.Unlock()
					}}, nil
			}}
			// One worker: the checked policies share the answered count.
			if _, err := Run(context.Background(), sc, []Strategy{wrapped}, Options{Sessions: 200, Workers: 1}); err != nil {
				t.Fatal(err)
			}
		}
		if len(errs) > 0 {
			t.Errorf("%s: %d contract violations, first: %s", name, len(errs), errs[0])
		}
		if answered == 0 {
			t.Errorf("%s: no canary was answered", name)
		}
	}
}
