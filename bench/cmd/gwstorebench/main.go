// Command gwstorebench measures how long a limits document written to the
// control plane's etcd takes to be in force on two gateways that follow it
// (issue 16's propagation target): a real etcd on loopback, two
// gateway.Gateway instances in this process, each with its own etcd client
// and FollowStore loop, and a writer with a third client. Each change's
// latency runs from just before the Put to the moment the second of the two
// gateways has applied the snapshot holding it (its Config shows the new
// rate).
//
//	cd bench && go run ./cmd/gwstorebench -changes 100
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/gateway"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/store"
	"github.com/veerhq/veer/store/storeetcd"
	"github.com/veerhq/veer/store/storeetcd/etcdtest"
)

const gwYAML = `
listen: {addr: 'off'}
routes: [{name: r, clusters: [{name: c}]}]
clusters: [{name: c, backends: [{address: '127.0.0.1:9'}]}]
limits: {keys: ['header:X-Tenant'], dimensions: [{name: tenant, default: {rate: 1000}}]}
`

func main() {
	changes := flag.Int("changes", 100, "limits documents to write")
	flag.Parse()
	dir, err := os.MkdirTemp("", "gwstorebench")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	srv, err := etcdtest.Start(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Kill()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type applied struct {
		gw   int
		rate float64
		at   time.Time
	}
	events := make(chan applied, 1024)
	for i := range 2 {
		var cfg gateway.Config
		if err := config.Parse([]byte(gwYAML), "gw.yaml", &cfg); err != nil {
			log.Fatal(err)
		}
		g, err := gateway.New(cfg, gateway.Options{Logger: obs.Discard, Registerer: prometheus.NewRegistry()})
		if err != nil {
			log.Fatal(err)
		}
		defer g.Close()
		st, err := storeetcd.New(storeetcd.Config{Endpoints: []string{srv.URL}}, storeetcd.Options{})
		if err != nil {
			log.Fatal(err)
		}
		defer st.Close()
		go g.FollowStore(ctx, st, gateway.StoreOptions{OnSnapshot: func(int64) {
			events <- applied{i, g.Config().Limits.Dimensions[0].Default.Rate, time.Now()}
		}})
	}
	w, err := storeetcd.New(storeetcd.Config{Endpoints: []string{srv.URL}}, storeetcd.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	// wait until both followers listed once
	for seen := map[int]bool{}; len(seen) < 2; {
		seen[(<-events).gw] = true
	}
	var lat []time.Duration
	for n := range *changes + 1 { // the first change is an untimed warm-up
		rate := float64(n + 1)
		start := time.Now()
		if _, err := w.Put(ctx, store.KeyGatewayLimits, []byte("dimensions: [{name: tenant, default: {rate: "+strconv.Itoa(n+1)+"}}]"), store.Write{Author: "bench"}); err != nil {
			log.Fatal(err)
		}
		var last time.Time
		for seen := map[int]bool{}; len(seen) < 2; {
			select {
			case e := <-events:
				if e.rate == rate {
					seen[e.gw], last = true, e.at
				}
			case <-time.After(30 * time.Second):
				log.Fatalf("change %d not applied by both gateways within 30s", n)
			}
		}
		if n > 0 {
			lat = append(lat, last.Sub(start))
		}
	}
	slices.Sort(lat)
	q := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	fmt.Printf("changes %d, both gateways applied: p50 %v p90 %v p99 %v max %v\n",
		len(lat), q(.5).Round(10*time.Microsecond), q(.9).Round(10*time.Microsecond), q(.99).Round(10*time.Microsecond), lat[len(lat)-1].Round(10*time.Microsecond))
}
