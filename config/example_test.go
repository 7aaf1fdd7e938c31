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
	// server.yaml: yaml: unmarshal errors:
	//   line 2: field workerz not found in type config_test.server
}
