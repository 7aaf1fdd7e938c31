package obs_test

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/obs"
)

func ExampleLint() {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "veer_shed_dropped", Help: "drops"}))
	for _, err := range obs.Lint(reg) {
		fmt.Println(err)
	}
	// Output:
	// metric "veer_shed_dropped": name must end in a unit or kind (_total, _seconds, _bytes, _ratio, _info, _count, _state, _requests, _limit, _inflight, _entries, _keys, _sessions, _invocations, _timestamp_seconds)
}

// ExampleNameOr: a component given no name labels its metrics "default".
func ExampleNameOr() {
	fmt.Println(obs.NameOr(""), obs.NameOr("payments"))
	// Output: default payments
}
