// Package controltest has fixtures for tests and measurements of the
// control plane.
package controltest

import (
	"fmt"

	"github.com/veerhq/veer/control"
)

// BigTable is the load: 100 rules (50 whitelist rules, each naming
// a list of 2000 device IDs, 100 000 in all; 50 bucket rules scoped to
// regions) over 21 regions and 4 sites. It returns the table and the lists
// by name (documents control.KeyWhitelists+name).
func BigTable() (*control.Table, map[string]*control.Whitelist) {
	lists := map[string]*control.Whitelist{}
	t := &control.Table{DefaultDomain: "wap.example.com", Salt: "bench"}
	for i := range 4 {
		s := control.Site{Name: fmt.Sprint("s", i), Sibling: fmt.Sprint("s", (i+1)%4)}
		for c := range 3 {
			s.Clusters = append(s.Clusters, control.Cluster{Name: fmt.Sprint("c", c), Domain: fmt.Sprintf("c%d.s%d.example.com", c, i)})
		}
		t.Sites = append(t.Sites, s)
	}
	for i := range 20 {
		t.Regions = append(t.Regions, control.Region{Name: fmt.Sprint("r", i), CIDRs: []string{fmt.Sprintf("10.%d.0.0/16", i), fmt.Sprintf("172.16.%d.0/24", i)}, Site: fmt.Sprint("s", i%4)})
	}
	t.Regions = append(t.Regions, control.Region{Name: "loopback", CIDRs: []string{"127.0.0.0/8", "::1/128"}, Site: "s0"})
	for i := range 50 {
		r := control.Rule{Name: fmt.Sprint("wl", i), List: fmt.Sprint("wl", i), Site: fmt.Sprint("s", i%4)}
		l := &control.Whitelist{}
		for j := range 2000 {
			l.DeviceIDs = append(l.DeviceIDs, fmt.Sprintf("wl-%d-%d", i, j))
		}
		lists[r.List] = l
		t.Rules = append(t.Rules, r)
	}
	for i := range 50 {
		t.Rules = append(t.Rules, control.Rule{Name: fmt.Sprint("b", i), Regions: []string{fmt.Sprint("r", i%20)},
			Bucket: &control.Bucket{From: float64(i % 10), To: float64(i%10) + 0.5}, Site: fmt.Sprint("s", (i+1)%4)})
	}
	return t, lists
}
