package storebolt_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/veerhq/veer/store"
	"github.com/veerhq/veer/store/storebolt"
)

// Optimistic concurrency and history with the embedded store.
func Example() {
	dir, _ := os.MkdirTemp("", "veer-store")
	defer os.RemoveAll(dir)
	s, err := storebolt.Open(filepath.Join(dir, "store.db"), storebolt.Options{})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	ctx := context.Background()
	d, _ := s.Put(ctx, "routing/state", []byte(`{}`), store.Write{Expect: store.Absent, Author: "ann"})
	fmt.Println("created version", d.Version)
	_, err = s.Put(ctx, "routing/state", []byte(`{"sites_down":["a"]}`), store.Write{Expect: 7, Author: "bob"})
	fmt.Println("stale writer:", errors.Is(err, store.ErrConflict))
	d, _ = s.Put(ctx, "routing/state", []byte(`{"sites_down":["a"]}`), store.Write{Expect: d.Version, Author: "bob", Reason: "dc a fire"})
	hist, _ := s.History(ctx, "routing/state", 0)
	for _, c := range hist {
		fmt.Printf("v%d by %s (%s): %s -> %s\n", c.Version, c.Author, c.Reason, c.Before, c.After)
	}
	// Output:
	// created version 1
	// stale writer: true
	// v2 by bob (dc a fire): {} -> {"sites_down":["a"]}
	// v1 by ann ():  -> {}
}
