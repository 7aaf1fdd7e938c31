package control

import (
	"fmt"
	"net/netip"
	"testing"
)

// BigTable is the load: 100 rules (50 whitelist rules holding
// 100 000 device IDs in all, 50 bucket rules scoped to regions) over 20
// regions and 4 sites.
func BigTable() *Table {
	t := &Table{DefaultDomain: "wap.example.com", Salt: "bench"}
	for i := range 4 {
		s := Site{Name: fmt.Sprint("s", i), Sibling: fmt.Sprint("s", (i+1)%4)}
		for c := range 3 {
			s.Clusters = append(s.Clusters, Cluster{fmt.Sprint("c", c), fmt.Sprintf("c%d.s%d.example.com", c, i)})
		}
		t.Sites = append(t.Sites, s)
	}
	for i := range 20 {
		t.Regions = append(t.Regions, Region{Name: fmt.Sprint("r", i), CIDRs: []string{fmt.Sprintf("10.%d.0.0/16", i), fmt.Sprintf("172.16.%d.0/24", i)}, Site: fmt.Sprint("s", i%4)})
	}
	t.Regions = append(t.Regions, Region{Name: "loopback", CIDRs: []string{"127.0.0.0/8", "::1/128"}, Site: "s0"})
	for i := range 50 {
		r := Rule{Name: fmt.Sprint("wl", i), Site: fmt.Sprint("s", i%4)}
		for j := range 2000 {
			r.DeviceIDs = append(r.DeviceIDs, fmt.Sprintf("wl-%d-%d", i, j))
		}
		t.Rules = append(t.Rules, r)
	}
	for i := range 50 {
		t.Rules = append(t.Rules, Rule{Name: fmt.Sprint("b", i), Regions: []string{fmt.Sprint("r", i%20)},
			Bucket: &Bucket{From: float64(i % 10), To: float64(i%10) + 0.5}, Site: fmt.Sprint("s", (i+1)%4)})
	}
	return t
}

// BenchmarkDecide measures rule evaluation on the compiled snapshot
// (answers signed on first use, so the loop measures the lookup).
func BenchmarkDecide(b *testing.B) {
	t := BigTable()
	if err := t.Validate(); err != nil {
		b.Fatal(err)
	}
	s := Compile(t, &State{}, &Emergency{}, 1, testKey(b))
	ids := make([]string, 4096)
	for i := range ids {
		if i%10 == 0 {
			ids[i] = fmt.Sprintf("wl-%d-%d", i%50, i%2000)
		} else {
			ids[i] = fmt.Sprint("device-", i)
		}
	}
	addrs := []netip.Addr{netip.MustParseAddr("10.3.1.1"), netip.MustParseAddr("203.0.113.1"), netip.MustParseAddr("172.16.19.4")}
	for i := range ids {
		s.Body(addrs[i%3], ids[i], "")
	}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		s.Body(addrs[i%3], ids[i&4095], "")
		i++
	}
}

func TestBigTableDecideAllocatesNothing(t *testing.T) {
	s := Compile(BigTable(), &State{}, &Emergency{}, 1, testKey(t))
	a := netip.MustParseAddr("10.3.1.1")
	s.Body(a, "wl-7-5", "")
	s.Body(a, "device-1", "")
	if n := testing.AllocsPerRun(1000, func() { s.Body(a, "wl-7-5", ""); s.Body(a, "device-1", "") }); n != 0 {
		t.Fatalf("%v allocations per decision", n)
	}
}
