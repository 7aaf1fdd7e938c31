package gateway_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/gateway"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/store"
	"github.com/veerhq/veer/store/storebolt"
)

// A gateway following the control plane's limits document: while the
// document is present it replaces the file's limits; deleted, the file's
// apply again. (In production the store is etcd, wired by cmd/veer from the
// control_store section; the embedded store here is the same interface.)
func ExampleGateway_FollowStore() {
	dir, _ := os.MkdirTemp("", "veer-example")
	defer os.RemoveAll(dir)
	st, err := storebolt.Open(filepath.Join(dir, "store.db"), storebolt.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()

	var cfg gateway.Config
	_ = config.Parse([]byte(`
listen: {addr: 'off'}
routes: [{name: api, clusters: [{name: c}]}]
clusters: [{name: c, backends: [{address: '127.0.0.1:9'}]}]
limits: {keys: [route], dimensions: [{name: route, default: {rate: 1000}}]}
`), "gateway.yaml", &cfg)
	g, err := gateway.New(cfg, gateway.Options{Logger: obs.Discard, Registerer: prometheus.NewRegistry()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer g.Close()

	snapshots := make(chan int64, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.FollowStore(ctx, st, gateway.StoreOptions{OnSnapshot: func(rev int64) { snapshots <- rev }})
	}()
	rate := func() float64 { return g.Config().Limits.Dimensions[0].Default.Rate }
	<-snapshots
	fmt.Println("file:", rate())

	d, _ := st.Put(ctx, store.KeyGatewayLimits, []byte("dimensions: [{name: route, default: {rate: 50}}]"), store.Write{Author: "ops"})
	for <-snapshots < d.Revision {
	}
	fmt.Println("store document:", rate())

	_ = st.Delete(ctx, store.KeyGatewayLimits, store.Write{Author: "ops"})
	<-snapshots
	fmt.Println("deleted:", rate())
	cancel()
	<-done
	// Output:
	// file: 1000
	// store document: 50
	// deleted: 1000
}
