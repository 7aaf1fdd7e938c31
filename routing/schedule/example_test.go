package schedule_test

import (
	"fmt"

	"github.com/veerhq/veer/routing/schedule"
)

func ExampleParseResponse() {
	r, err := schedule.ParseResponse([]byte(`{
	  "version": 1,
	  "ttl_seconds": 300,
	  "nodes": [
	    {"addr": "203.0.113.10:443", "protocols": ["h3", "h2"]},
	    {"addr": "198.51.100.7:8443", "server_name": "edge.example.net"}
	  ]
	}`))
	if err != nil {
		panic(err)
	}
	for _, n := range r.Nodes {
		fmt.Println(n.Addr, n.ServerName, n.Protocols)
	}
	_, err = schedule.ParseResponse([]byte(`{"version": 2, "nodes": []}`))
	fmt.Println(err)
	// Output:
	// 203.0.113.10:443  [h3 h2]
	// 198.51.100.7:8443 edge.example.net []
	// lastmile: bad schedule response: version 2, want 1
}
