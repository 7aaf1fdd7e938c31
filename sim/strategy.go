package sim

import (
	"fmt"
	"strings"

	"github.com/veerhq/veer/failover"
)

// The strategies: failover's policies built from the scenario's
// failover.Config (Scenario.PolicyConfig) through failover.NewPolicy, the
// same function the Transport uses, so a strategy runs exactly the code a
// Transport with that Config runs.
var (
	// Veer is the product default: what failover.Config{} (policy "veer")
	// does in a Transport.
	Veer = Strategy{Name: "veer", New: policyOf(failover.PolicyVeer, false)}
	// Uber is the seed's machine.
	Uber = Strategy{Name: "uber", New: policyOf(failover.PolicyUber, false)}
	// UberConfirm is Uber with failover.Config.ConfirmPrimary (beyond the
	// seed): a backup canary success in FAILOVER is confirmed by a canary
	// to the primary before the machine enters BACKUP.
	UberConfirm = Strategy{Name: "uber-confirm", New: policyOf(failover.PolicyUber, true)}
	RoundRobin  = Strategy{Name: "roundrobin", New: policyOf(failover.PolicyRoundRobin, false)}
	Threshold   = Strategy{Name: "threshold", New: policyOf(failover.PolicyThreshold, false)}
)

// policyOf builds the named policy from a scenario's configuration.
func policyOf(policy string, confirm bool) func(failover.Config) (failover.Policy, error) {
	return func(c failover.Config) (failover.Policy, error) {
		c.Policy, c.ConfirmPrimary = policy, confirm
		return failover.NewPolicy(c)
	}
}

// Strategies lists the built-in strategies in their default order.
func Strategies() []Strategy { return []Strategy{Veer, Uber, UberConfirm, RoundRobin, Threshold} }

// StrategyNames returns the names of Strategies(), comma-separated: the
// default strategy list of veer sim.
func StrategyNames() string {
	names := make([]string, 0, 5)
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
