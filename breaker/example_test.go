package breaker_test

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/breaker"
	"github.com/veerhq/veer/config"
)

// ExampleNew: a config read from a file is validated, and New refuses an
// invalid one with an error naming the field and its line, instead of
// running with defaults.
func ExampleNew() {
	var cfg breaker.Config
	err := config.Parse([]byte("window: 30s\nmin_requests: -5\n"), "breaker.yaml", &cfg)
	fmt.Println(err)

	_, err = breaker.New(breaker.Config{OpenFor: -1}, breaker.Options{Registerer: prometheus.NewRegistry()})
	fmt.Println(err)

	b, err := breaker.New(breaker.Config{}, breaker.Options{Name: "payments", Registerer: prometheus.NewRegistry()})
	fmt.Println(b.Status().State, err)
	// Output:
	// breaker.yaml:2: min_requests: must not be negative
	// open_for: must not be negative
	// closed <nil>
}
