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
	RoundRobin = Strategy{Name: "roundrobin", New: func(p PolicySpec, domains []string) (failover.Policy, error) {
		return failover.NewRoundRobin(p.Config(domains))
	}}
	Threshold = Strategy{Name: "threshold", New: func(p PolicySpec, domains []string) (failover.Policy, error) {
		return failover.NewThreshold(p.Config(domains))
	}}
)

// Strategies lists the built-in strategies in their default order.
func Strategies() []Strategy { return []Strategy{Uber, RoundRobin, Threshold} }

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
			return nil, fmt.Errorf("sim: unknown strategy %q (want uber, roundrobin or threshold)", name)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("sim: no strategy given")
	}
	return out, nil
}
