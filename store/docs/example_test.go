package docs_test

import (
	"fmt"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/store"
	"github.com/veerhq/veer/store/docs"
)

func ExampleAccess() {
	var a docs.Access
	err := config.Parse([]byte(`
default:
  - addr: 203.0.113.10:443
    protocols: [h3, h2]
    weight: 2
  - addr: 198.51.100.7
`), store.KeyAccess, &a)
	fmt.Println(err)
	// Output:
	// access/nodes:6: default[1].addr: "198.51.100.7": want ip:port
}
