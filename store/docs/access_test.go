package docs_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/routing/schedule"
	"github.com/veerhq/veer/store"
	"github.com/veerhq/veer/store/docs"
)

// TestAccessParseErrorsNameKeyLineField: the access document decodes
// strictly from YAML with the wire node's fields at the node's own level
// (inline), and every bad field is named with the key and line.
func TestAccessParseErrorsNameKeyLineField(t *testing.T) {
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"ok", "ttl_seconds: 60\ndefault:\n  - addr: 192.0.2.1:443\n    server_name: edge.test\n    protocols: [h3, h2]\n    weight: 2\n", ""},
		{"ttl out of range", "ttl_seconds: 86401\n", "access/nodes:1: ttl_seconds: 86401 out of 0..86400"},
		{"negative ttl", "ttl_seconds: -1\n", "access/nodes:1: ttl_seconds"},
		{"addr without port", "default:\n  - addr: 192.0.2.1\n", "access/nodes:2: default[0].addr"},
		{"port zero", "default:\n  - addr: 192.0.2.1:0\n", "access/nodes:2: default[0].addr"},
		{"unknown protocol", "regions:\n  eu:\n    - addr: 192.0.2.1:443\n      protocols: [spdy]\n", "access/nodes:4: regions.eu[0].protocols: \"spdy\": want h3, h2 or http/1.1"},
		{"negative weight", "default:\n  - addr: 192.0.2.1:443\n    weight: -1\n", "access/nodes:3: default[0].weight: negative"},
		{"unknown field", "default:\n  - addr: 192.0.2.1:443\n    bogus: 1\n", "access/nodes:3: default[0].bogus: unknown field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a docs.Access
			err := config.Parse([]byte(tc.doc), store.KeyAccess, &a)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("error %v, want none", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestAccessNodeIsTheWireNodePlus: a document node read from YAML carries
// the wire node clients are told as it is, and its JSON has the wire
// fields at the node's level, as the documents always had.
func TestAccessNodeIsTheWireNodePlus(t *testing.T) {
	var a docs.Access
	doc := "default:\n  - addr: 192.0.2.1:443\n    server_name: edge.test\n    protocols: [h2]\n    weight: 3\n    down: true\n    domains: [api.test]\n"
	if err := config.Parse([]byte(doc), store.KeyAccess, &a); err != nil {
		t.Fatal(err)
	}
	n := a.Default[0]
	want := schedule.Node{Addr: "192.0.2.1:443", ServerName: "edge.test", Protocols: []string{"h2"}}
	if n.Addr != want.Addr || n.ServerName != want.ServerName || len(n.Protocols) != 1 || n.Protocols[0] != "h2" || n.Weight != 3 || !n.Down || n.Domains[0] != "api.test" {
		t.Fatalf("decoded %+v", n)
	}
	b, err := json.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	const wantJSON = `{"addr":"192.0.2.1:443","server_name":"edge.test","protocols":["h2"],"weight":3,"down":true,"domains":["api.test"]}`
	if string(b) != wantJSON {
		t.Fatalf("JSON %s, want %s", b, wantJSON)
	}
	wire, err := json.Marshal(n.Node)
	if err != nil {
		t.Fatal(err)
	}
	if w, _ := json.Marshal(want); string(wire) != string(w) {
		t.Fatalf("wire node %s, want %s", wire, w)
	}
}
