package watch_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/config/watch"
	"github.com/veerhq/veer/obs"
)

type server struct {
	Workers int `yaml:"workers"`
}

// ExampleFile loads a file, hands each accepted version to an apply function
// (a library's Apply method in real use), and keeps the old version when a
// new one is rejected. Reload is what a SIGHUP handler calls; the watcher
// also reloads by itself when the file changes.
func ExampleFile() {
	dir, _ := os.MkdirTemp("", "watch-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "server.yaml")
	_ = os.WriteFile(path, []byte("workers: 4\n"), 0o600)

	apply := func(s server) error {
		fmt.Println("applied workers =", s.Workers)
		return nil
	}
	w, err := watch.File(path, watch.Options{Registerer: prometheus.NewRegistry(), Logger: obs.Discard}, apply)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()

	_ = os.WriteFile(path, []byte("workerz: 8\n"), 0o600)
	fmt.Println("rejected:", w.Reload() != nil, "current workers =", w.Current().Workers)
	// Output:
	// applied workers = 4
	// rejected: true current workers = 4
}
