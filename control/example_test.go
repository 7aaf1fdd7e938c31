package control_test

import (
	"crypto/ed25519"
	"fmt"
	"net/netip"

	"github.com/veerhq/veer/control"
)

// Rules in order: whitelist, bucket, the region's site; a site marked down
// sends its users to the sibling.
func ExampleCompile() {
	t := &control.Table{
		DefaultDomain: "wap.example.com",
		Salt:          "example",
		Regions:       []control.Region{{Name: "east", CIDRs: []string{"10.0.0.0/8"}, Site: "a"}},
		Sites: []control.Site{
			{Name: "a", Sibling: "b", Clusters: []control.Cluster{{Name: "a1", Domain: "a1.example.com"}}},
			{Name: "b", Sibling: "a", Clusters: []control.Cluster{{Name: "b1", Domain: "b1.example.com"}}},
		},
		Rules: []control.Rule{{Name: "beta", DeviceIDs: []string{"tester-1"}, Site: "b"}},
	}
	if err := t.Validate(); err != nil {
		panic(err)
	}
	_, key, _ := ed25519.GenerateKey(nil)
	east := netip.MustParseAddr("10.1.2.3")
	s := control.Compile(t, &control.State{}, &control.Emergency{}, 1, key)
	for _, dev := range []string{"tester-1", "someone"} {
		a := s.Decide(east, dev, "")
		fmt.Println(dev, a.Rule, a.Primary, a.Backups)
	}
	down := control.Compile(t, &control.State{SitesDown: []string{"a"}}, &control.Emergency{}, 2, key)
	fmt.Println("a down:", down.Decide(east, "someone", "").Primary)
	// Output:
	// tester-1 whitelist:beta b1.example.com [a1.example.com]
	// someone region:east a1.example.com [b1.example.com]
	// a down: b1.example.com
}
