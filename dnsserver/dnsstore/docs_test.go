package dnsstore

import (
	"strings"
	"testing"

	"github.com/veerhq/veer/store"
)

func TestDocumentErrorsNameKeyLineField(t *testing.T) {
	for _, tc := range []struct {
		name, key, doc, want string
	}{
		{"unknown field", KeyZones, "zones:\n  - origin: example.test.\n    bogus: 1\n", "dns/zones:3: zones[0].bogus: unknown field"},
		{"bad record", KeyZones, "zones:\n  - origin: example.test.\n    records:\n      - \"www A nope\"\n", "dns/zones:4: zones[0].records[0]"},
		{"nodes in zones", KeyZones, "zones:\n  - origin: example.test.\n    access:\n      - name: edge\n        nodes: [{addr: 10.0.0.1}]\n", "dns/zones:5: zones[0].access[0].nodes: not allowed: nodes come from access/nodes"},
		{"bad cidr", KeyZones, "regions:\n  - cidr: x\n    region: eu\n", "dns/zones:2: regions[0].cidr"},
		{"bad addr", store.KeyAccess, "default:\n  - addr: 10.0.0.1:443\n  - addr: nope\n", "access/nodes:3: default[1].addr"},
		{"bad region addr", store.KeyAccess, "regions:\n  eu:\n    - addr: 10.0.0.1\n", "access/nodes:3: regions.eu[0].addr"},
		{"not yaml", store.KeyAccess, "default: [", "access/nodes: yaml:"},
		{"table not yaml", store.KeyTable, "regions: {", "routing/table: yaml:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := parse(tc.key, []byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func parse(key string, v []byte) error {
	var err error
	switch key {
	case KeyZones:
		_, err = parseZones(v)
	case store.KeyAccess:
		_, err = parseAccess(v)
	default:
		_, err = parseTable(v)
	}
	return err
}

func TestCombine(t *testing.T) {
	z, err := parseZones([]byte("zones:\n  - origin: Example.Test\n    access:\n      - name: '@'\n      - name: edge.example.test.\n"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := parseAccess([]byte(`{"regions": {"us": [{"addr": "[2001:db8::1]:443", "weight": 3}], "eu": [{"addr": "10.0.0.1:443", "domains": ["example.test"]}]},
		"default": [{"addr": "10.0.0.2:443", "domains": ["edge.example.test"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	d, err := combine(z, a, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := d.Zones[0].Access
	if n := got[0].Nodes; len(n) != 2 || n[0].Addr != "10.0.0.1" || n[0].Region != "eu" || n[1].Addr != "2001:db8::1" || n[1].Weight != 3 || n[1].Region != "us" {
		t.Fatalf("apex nodes %+v", n)
	}
	if n := got[1].Nodes; len(n) != 2 || n[0].Addr != "2001:db8::1" || n[1].Addr != "10.0.0.2" || n[1].Region != "" {
		t.Fatalf("edge nodes %+v", n)
	}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(z.Zones[0].Access[0].Nodes) != 0 {
		t.Fatal("combine modified the parsed document")
	}
}

func FuzzDocuments(f *testing.F) {
	f.Add([]byte("zones:\n  - origin: example.test.\n    access:\n      - name: edge\n"))
	f.Add([]byte(`{"default": [{"addr": "10.0.0.2:443", "down": true}], "regions": {"eu": [{"addr": "[::1]:1"}]}}`))
	f.Add([]byte(`{"regions": [{"name": "eu", "cidrs": ["10.0.0.0/8"]}]}`))
	f.Fuzz(func(t *testing.T, v []byte) {
		z, zerr := parseZones(v)
		a, aerr := parseAccess(v)
		r, _ := parseTable(v)
		if zerr == nil && aerr == nil {
			if d, err := combine(z, a, r); err == nil {
				_ = d.Validate() // must not panic; the server refuses what is invalid
			}
		}
	})
}
