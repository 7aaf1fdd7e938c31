package control

import (
	"encoding/json"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/veerhq/veer/store"
)

// TestOverrideKeepsTheIndexes: a change to the state or emergency document
// recompiles only the overlay; the table's and whitelists' indexes are
// shared (before this, each override re-decoded and re-indexed 100 000
// whitelist entries on every instance: p50 1.9 s propagation). A change to
// a whitelist rebuilds them, and a deleted whitelist is not served.
func TestOverrideKeepsTheIndexes(t *testing.T) {
	s, err := New(Config{DataDir: t.TempDir()}, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tb := Table{DefaultDomain: "wap.example.com", DefaultSite: "a",
		Sites: []Site{{Name: "a", Clusters: []Cluster{{Name: "a1", Domain: "a1.example.com"}}}, {Name: "b", Clusters: []Cluster{{Name: "b1", Domain: "b1.example.com"}}}},
		Rules: []Rule{{Name: "beta", List: "beta", Site: "b"}}}
	doc := func(key string, v any, rev int64) store.Doc {
		b, _ := json.Marshal(v)
		return store.Doc{Key: key, Value: b, Version: 1, Revision: rev}
	}
	docs := map[string]store.Doc{
		KeyTable:               doc(KeyTable, tb, 1),
		KeyWhitelists + "beta": doc(KeyWhitelists+"beta", Whitelist{DeviceIDs: []string{"tester"}}, 2),
	}
	step := func(rev int64) *Snapshot {
		s.apply(&store.Snapshot{Revision: rev, Docs: docs})
		return s.Snapshot()
	}
	first := step(2)
	docs[KeyEmergency] = doc(KeyEmergency, Emergency{Global: &Override{Primary: "sorry.example.com"}}, 3)
	second := step(3)
	if second.base != first.base || second.Decide(zeroAddr, "x", "").Primary != "sorry.example.com" {
		t.Fatalf("override: base shared %v, answer %+v", second.base == first.base, second.Decide(zeroAddr, "x", ""))
	}
	delete(docs, KeyEmergency)
	docs[KeyState] = doc(KeyState, State{SitesDown: []string{"b"}}, 4)
	third := step(4)
	if third.base != first.base || third.Decide(zeroAddr, "tester", "").Primary != "wap.example.com" {
		t.Fatalf("state: base shared %v, answer %+v", third.base == first.base, third.Decide(zeroAddr, "tester", ""))
	}
	delete(docs, KeyState)
	docs[KeyWhitelists+"beta"] = doc(KeyWhitelists+"beta", Whitelist{DeviceIDs: []string{"other"}}, 5)
	fourth := step(5)
	if fourth.base == first.base || fourth.Decide(zeroAddr, "tester", "").Rule != "default_site" || fourth.Decide(zeroAddr, "other", "").Rule != "whitelist:beta" {
		t.Fatal("a changed whitelist was not re-indexed")
	}
	delete(docs, KeyWhitelists+"beta")
	docs[KeyState] = doc(KeyState, State{}, 6) // the deletion comes with a newer revision elsewhere
	fifth := step(6)
	if r := fifth.Decide(zeroAddr, "other", "").Rule; r != "default_site" {
		t.Fatalf("deleted whitelist still served: %s", r)
	}
}

var zeroAddr = netip.MustParseAddr("192.0.2.1")
