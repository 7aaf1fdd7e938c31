package sim

import (
	"fmt"
	"strings"

	"github.com/veerhq/veer/failover"
)

// The strategies of seed 000's evaluation, each backed by the failover
// package's policy (the same code as the Transport's).
var (
	Uber = Strategy{Name: "uber", New: func(p PolicySpec, domains []string) (failover.Policy, error) {
		return failover.NewUber(p.Config(domains))
	}}
	// UberConfirm is Uber with failover.Config.ConfirmPrimary (beyond the
	// seed): a backup canary success in FAILOVER is confirmed by a canary
	// to the primary before the machine enters BACKUP.
	UberConfirm = Strategy{Name: "uber-confirm", New: func(p PolicySpec, domains []string) (failover.Policy, error) {
		c := p.Config(domains)
		c.ConfirmPrimary = true
		return failover.NewUber(c)
	}}
	RoundRobin = Strategy{Name: "roundrobin", New: func(p PolicySpec, domains []string) (failover.Policy, error) {
		return failover.NewRoundRobin(p.Config(domains))
	}}
	Threshold = Strategy{Name: "threshold", New: func(p PolicySpec, domains []string) (failover.Policy, error) {
		return failover.NewThreshold(p.Config(domains))
	}}
)

// Strategies lists the built-in strategies in their default order.
func Strategies() []Strategy { return []Strategy{Uber, UberConfirm, RoundRobin, Threshold} }

// StrategyNames returns the names of Strategies(), comma-separated: the
// default strategy list of veer sim.
func StrategyNames() string {
	names := make([]string, 0, 4)
	for _, s := range Strategies() {
		names = append(names, s.Name)
	}
	return strings.Join(names, ",")
}

// ParseStrategies parses a comma-separated list of strategy names.
func ParseStrategies(list string) ([]Strategy, error) {
	var out []Strategy
	seen := map[string]bool{}
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" || seen[name] {
			continue
		}
		seen[name] = true
		found := false
		for _, s := range Strategies() {
			if s.Name == name {
				out, found = append(out, s), true
			}
		}
		if !found {
			return nil, fmt.Errorf("sim: unknown strategy %q (want one of %s)", name, StrategyNames())
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("sim: no strategy given")
	}
	return out, nil
}
