package dnsstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/veerhq/veer/dnsserver"
	"github.com/veerhq/veer/dnsserver/dnsstore"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/store"
	"github.com/veerhq/veer/store/storebolt"
)

// The zones and the control plane's access nodes, combined: the node
// marked down is left out, regions come from the document the node is
// listed under.
func Example() {
	dir, _ := os.MkdirTemp("", "dnsstore")
	defer os.RemoveAll(dir)
	st, err := storebolt.Open(filepath.Join(dir, "store.db"), storebolt.Options{})
	if err != nil {
		panic(err)
	}
	defer st.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st.Put(ctx, dnsstore.KeyZones, []byte("zones: [{origin: example.test., access: [{name: edge, ttl: 5}]}]"), store.Write{})
	st.Put(ctx, store.KeyAccess, []byte(`{"regions": {"eu": [{"addr": "10.0.0.1:443", "weight": 2}, {"addr": "10.0.0.2:443", "down": true}]},
		"default": [{"addr": "[2001:db8::1]:443"}]}`), store.Write{})

	src, err := dnsstore.New(st, dnsstore.Options{Logger: obs.Discard})
	if err != nil {
		panic(err)
	}
	var once sync.Once
	src.Run(ctx, func(d dnsserver.Data) error {
		once.Do(func() {
			for _, n := range d.Zones[0].Access[0].Nodes {
				fmt.Printf("%s region=%q weight=%d\n", n.Addr, n.Region, n.Weight)
			}
			cancel()
		})
		return nil
	})
	// Output:
	// 10.0.0.1 region="eu" weight=2
	// 2001:db8::1 region="" weight=1
}
