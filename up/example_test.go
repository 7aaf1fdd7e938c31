package up_test

import (
	"fmt"

	"github.com/veerhq/veer/up"
)

// The scenarios `veer chaos run all` plays, in order, with their seeds.
func ExampleScenarios() {
	for _, s := range up.Scenarios() {
		fmt.Println(s.Name, s.Seed)
	}
	// Output:
	// overload 001
	// cluster-kill 003
	// primary-blackhole 000
	// dns-outage 002
	// gateway-kill 000
	// site-down 003/004
	// async-kill 003
	// bad-release 003
	// good-release 003
}

// A result prints its verdict with the measured figures beside the promise.
func ExampleResult_String() {
	r := up.Result{Name: "cluster-kill", Seed: "003", Pass: true, Promise: ">= 99.9% of requests succeed",
		Mechanism: "SIGKILL of cluster a1", Measured: []string{"100.00% success (588 of 588)"}}
	fmt.Print(r)
	// Output:
	// PASS cluster-kill (seed 003)
	//   promise:   >= 99.9% of requests succeed
	//   mechanism: SIGKILL of cluster a1
	//   measured:  100.00% success (588 of 588)
}
