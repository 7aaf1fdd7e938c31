package config_test

import (
	"fmt"

	"github.com/veerhq/veer/config"
)

type server struct {
	Listen  string `yaml:"listen"`
	Workers int    `yaml:"workers"`
}

func (s *server) Validate() error {
	if s.Workers < 0 {
		return config.Field("workers", "must be >= 0, got %d", s.Workers)
	}
	return nil
}

func ExampleParse() {
	var s server
	err := config.Parse([]byte("listen: :8080\nworkers: -2\n"), "server.yaml", &s)
	fmt.Println(err)
	err = config.Parse([]byte("listen: :8080\nworkerz: 2\n"), "server.yaml", &s)
	fmt.Println(err)
	// Output:
	// server.yaml:2: workers: must be >= 0, got -2
	// server.yaml:2: workerz: unknown field
}

type limits struct {
	Rate int `yaml:"rate"`
}

func (l *limits) Validate() error {
	if l.Rate < 0 {
		return config.Field("rate", "must not be negative")
	}
	return nil
}

type service struct {
	Name   string `yaml:"name"`
	Limits limits `yaml:"limits"`
}

// Validate reuses the nested struct's Validate; In prefixes its field paths.
func (s *service) Validate() error { return config.In("limits", s.Limits.Validate()) }

func ExampleIn() {
	var s service
	fmt.Println(config.Parse([]byte("name: api\nlimits:\n  rate: -1\n"), "svc.yaml", &s))
	// Output: svc.yaml:3: limits.rate: must not be negative
}

// ExampleLocate: an error found after parsing (here, a field a running
// component cannot change) gets the file and line where the field is.
func ExampleLocate() {
	data := []byte("name: api\nlimits:\n  rate: 5\n")
	err := config.Field("name", "cannot change at run time")
	fmt.Println(config.Locate(err, "svc.yaml", data))
	// Output: svc.yaml:1: name: cannot change at run time
}
