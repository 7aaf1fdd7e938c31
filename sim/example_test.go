package sim_test

import (
	"context"
	"fmt"

	"github.com/veerhq/veer/sim"
)

// Run a bundled scenario with three strategies and compare where their
// traffic went. Same seed, same numbers.
func ExampleRun() {
	sc, err := sim.LoadBundled("default")
	if err != nil {
		panic(err)
	}
	res, err := sim.Run(context.Background(), sc, []sim.Strategy{sim.Veer, sim.Uber, sim.RoundRobin}, sim.Options{Sessions: 200})
	if err != nil {
		panic(err)
	}
	for _, name := range res.Order {
		s := res.Strategies[name]
		fmt.Printf("%-10s primary %.1f%%, %d requests\n", name, 100*s.PrimaryShare, s.Requests)
	}
	// Output:
	// veer       primary 99.9%, 64562 requests
	// uber       primary 99.2%, 64562 requests
	// roundrobin primary 47.8%, 64562 requests
}

// Scenarios are YAML over the defaults; errors name the field and line.
func ExampleParseScenario() {
	_, err := sim.ParseScenario([]byte("name: mine\nsessions: -5\n"), "mine.yaml")
	fmt.Println(err)
	// Output:
	// mine.yaml:2: sessions: must be between 1 and 10000000, got -5
}
