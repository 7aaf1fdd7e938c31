package control

import (
	"crypto/ed25519"
	"encoding/json"
	"net/netip"
	"testing"
	"time"

	"github.com/veerhq/veer/routing"
)

func FuzzParseRouteRequest(f *testing.F) {
	f.Add([]byte(`{"device_id":"d","customer_id":"c","app":"a","app_version":"1","platform":"ios"}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"device_id":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseRouteRequest(b)
		if err == nil && (r.DeviceID == "" && r.CustomerID == "" || len(r.DeviceID) > maxIDLen || len(r.CustomerID) > maxIDLen) {
			t.Fatalf("accepted %+v", r)
		}
	})
}

func FuzzParseScheduleRequest(f *testing.F) {
	f.Add([]byte(`{"version":1,"domain":"api.example.com","client":"veer","protocols":["h3"]}`))
	f.Add([]byte(`{"version":2}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseScheduleRequest(b)
		if err == nil && (r.Version != 1 || !routing.ValidDomain(r.Domain)) {
			t.Fatalf("accepted %+v", r)
		}
	})
}

func FuzzParsePlaybook(f *testing.F) {
	f.Add([]byte(`{"action":"site_down","site":"a"}`))
	f.Add([]byte(`{"action":"emergency_set","override":{"primary":"x.example.com"}}`))
	f.Add([]byte(`{"action":"emergency_set","override":{}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePlaybook(b)
		if err == nil && p.Action == "emergency_set" && (p.Override == nil || p.Override.validate() != nil) {
			t.Fatalf("accepted %+v", p)
		}
	})
}

func FuzzParseIfMatch(f *testing.F) {
	for _, s := range []string{`"3"`, "3", "W/\"3\"", "*", "", "-1", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if v, err := ParseIfMatch(s); err == nil && v < 0 {
			t.Fatalf("%q -> %d", s, v)
		}
	})
}

// FuzzTable: any table that validates compiles, and every decision is a
// signed, verifiable answer.
func FuzzTable(f *testing.F) {
	b, _ := json.Marshal(Table{DefaultDomain: "wap.example.com", Regions: []Region{{Name: "r", CIDRs: []string{"10.0.0.0/8"}, Site: "a"}},
		Sites: []Site{{Name: "a", Clusters: []Cluster{{"a1", "a1.example.com"}}}},
		Rules: []Rule{{Name: "b", Bucket: &Bucket{From: 0, To: 50}, Site: "a"}, {Name: "w", DeviceIDs: []string{"x"}, Site: "a"}}})
	f.Add(b, "x", "10.1.1.1")
	f.Add([]byte("default_domain: w.example\nsites: [{name: a, clusters: [{name: c, domain: d.example}]}]\ndefault_site: a\n"), "", "::1")
	_, key, _ := ed25519.GenerateKey(nil)
	pub := key.Public().(ed25519.PublicKey)
	f.Fuzz(func(t *testing.T, raw []byte, device, addr string) {
		v, err := ValidateDocument(KeyTable, raw)
		if err != nil {
			return
		}
		s := Compile(v.(*Table), &State{}, &Emergency{}, 1, key)
		a, _ := netip.ParseAddr(addr)
		if _, err := routing.VerifyFor(s.Body(a, device, device, time.Unix(1e9, 0)), []ed25519.PublicKey{pub}, device, time.Unix(1e9, 0)); err != nil {
			t.Fatalf("answer does not verify: %v", err)
		}
	})
}

// FuzzValidateDocument: every document kind decodes strictly without
// panicking; control's own documents that validate re-validate after a
// JSON round trip. (shed.Config does not: its zero tier marshals as
// "unset", which its parser rejects; the store keeps the bytes as written,
// so control never round-trips it.)
func FuzzValidateDocument(f *testing.F) {
	f.Add(0, []byte(`{"sites_down":["a"],"clusters_down":["a/a1"]}`))
	f.Add(1, []byte(`{"global":{"site":"b"},"regions":{"east":{"primary":"x.example.com"}}}`))
	f.Add(2, []byte(`{"ttl_seconds":30,"regions":{"east":[{"addr":"192.0.2.1:443","weight":3}]}}`))
	f.Add(3, []byte(`{"device_ids":["a","b"]}`))
	f.Add(4, []byte("endpoints: []\n"))
	keys := []string{KeyState, KeyEmergency, KeyAccess, KeyWhitelists + "beta", KeyCriticality, KeyLimits, KeyTable}
	f.Fuzz(func(t *testing.T, k int, raw []byte) {
		key := keys[uint(k)%uint(len(keys))]
		v, err := ValidateDocument(key, raw)
		if err != nil || key == KeyCriticality || key == KeyLimits {
			return
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ValidateDocument(key, b); err != nil {
			t.Fatalf("%s: %s validated, its JSON %s does not: %v", key, raw, b, err)
		}
	})
}
