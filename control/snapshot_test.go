package control

import (
	"crypto/ed25519"
	"fmt"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/veerhq/veer/routing"
)

func testKey(t testing.TB) ed25519.PrivateKey {
	_, k, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// twoSites is two active-active sites of two clusters each.
func twoSites() *Table {
	return &Table{
		DefaultDomain: "wap.example.com", Salt: "s1",
		Regions: []Region{
			{Name: "east", CIDRs: []string{"10.0.0.0/8"}, Site: "a"},
			{Name: "east-lab", CIDRs: []string{"10.9.0.0/16"}, Site: "b"},
			{Name: "west", CIDRs: []string{"192.0.2.0/24", "2001:db8::/32"}, Site: "b"},
		},
		Sites: []Site{
			{Name: "a", Sibling: "b", Clusters: []Cluster{{"a1", "a1.example.com"}, {"a2", "a2.example.com"}}},
			{Name: "b", Sibling: "a", Clusters: []Cluster{{"b1", "b1.example.com"}, {"b2", "b2.example.com"}}},
		},
		Rules: []Rule{
			{Name: "vip", DeviceIDs: []string{"dev-vip"}, CustomerIDs: []string{"cust-vip"}, Site: "b"},
			{Name: "west-only", Regions: []string{"west"}, DeviceIDs: []string{"dev-west"}, Site: "a"},
			{Name: "shift", Bucket: &Bucket{From: 0, To: 10}, Site: "b"},
		},
	}
}

var (
	east = netip.MustParseAddr("10.1.2.3")
	lab  = netip.MustParseAddr("10.9.0.1")
	west = netip.MustParseAddr("2001:db8::1")
	none = netip.MustParseAddr("203.0.113.1")
)

// inBucket finds a device ID whose slot is in [from, to) percent.
func inBucket(salt string, from, to float64, not bool) string {
	for i := 0; ; i++ {
		id := fmt.Sprintf("dev-%d", i)
		s := uint32(hashID(salt, id) % Slots)
		if (s >= slot(from) && s < slot(to)) != not {
			return id
		}
	}
}

func TestDecideRuleOrder(t *testing.T) {
	tb := twoSites()
	if err := tb.Validate(); err != nil {
		t.Fatal(err)
	}
	bucketed := inBucket("s1", 0, 10, false)
	plain := inBucket("s1", 0, 10, true)
	steps := []struct {
		name           string
		st             State
		em             Emergency
		addr           netip.Addr
		device, cust   string
		rule, siteWant string
	}{
		{"region default", State{}, Emergency{}, east, plain, "", "region:east", "a"},
		{"longest prefix wins", State{}, Emergency{}, lab, plain, "", "region:east-lab", "b"},
		{"IPv6 region", State{}, Emergency{}, west, plain, "", "region:west", "b"},
		{"no region, no default site", State{}, Emergency{}, none, plain, "", "default", "wap"},
		{"whitelist device", State{}, Emergency{}, east, "dev-vip", "", "whitelist:vip", "b"},
		{"whitelist customer", State{}, Emergency{}, east, plain, "cust-vip", "whitelist:vip", "b"},
		{"whitelist beats bucket", State{}, Emergency{}, east, bucketed, "cust-vip", "whitelist:vip", "b"},
		{"scoped whitelist outside its region", State{}, Emergency{}, east, "dev-west", "", "region:east", "a"},
		{"scoped whitelist in its region", State{}, Emergency{}, west, "dev-west", "", "whitelist:west-only", "a"},
		{"bucket", State{}, Emergency{}, east, bucketed, "", "bucket:shift", "b"},
		{"site down: sibling", State{SitesDown: []string{"a"}}, Emergency{}, east, plain, "", "region:east", "b"},
		{"both sites down: default", State{SitesDown: []string{"a", "b"}}, Emergency{}, east, plain, "", "default", "wap"},
		{"all clusters of a down: sibling", State{ClustersDown: []string{"a/a1", "a/a2"}}, Emergency{}, east, plain, "", "region:east", "b"},
		{"emergency global site", State{}, Emergency{Global: &Override{Site: "b"}}, east, "dev-vip", "", "emergency:global", "b"},
		{"emergency global domain", State{}, Emergency{Global: &Override{Primary: "sorry.example.com"}}, west, plain, "", "emergency:global", "sorry"},
		{"emergency region", State{}, Emergency{Regions: map[string]Override{"west": {Site: "a"}}}, west, "dev-vip", "", "emergency:west", "a"},
		{"emergency other region untouched", State{}, Emergency{Regions: map[string]Override{"west": {Site: "a"}}}, east, plain, "", "region:east", "a"},
	}
	key := testKey(t)
	for _, st := range steps {
		s := Compile(tb, &st.st, &st.em, 5, key)
		a := s.Decide(st.addr, st.device, st.cust)
		if a.Rule != st.rule || a.Primary[:len(st.siteWant)] != st.siteWant || a.Version != 5 {
			t.Errorf("%s: rule %q primary %q, want %q on %s", st.name, a.Rule, a.Primary, st.rule, st.siteWant)
		}
		got, err := routing.VerifyFor(s.Body(st.addr, st.device, st.cust, time.Now()), []ed25519.PublicKey{s.PublicKey()}, st.device, time.Now())
		if err != nil || got.Primary != a.Primary || got.Rule != a.Rule {
			t.Errorf("%s: signed body %+v %v", st.name, got, err)
		}
	}
}

func TestClusterDownMovesOnlyItsUsers(t *testing.T) {
	tb := twoSites()
	key := testKey(t)
	before := Compile(tb, &State{}, &Emergency{}, 1, key)
	after := Compile(tb, &State{ClustersDown: []string{"a/a1"}}, &Emergency{}, 2, key)
	moved, onA1 := 0, 0
	for i := range 10000 {
		id := fmt.Sprintf("d%d", i)
		b, a := before.Decide(east, id, "").Primary, after.Decide(east, id, "").Primary
		if b == "a1.example.com" {
			onA1++
			if a != "a2.example.com" {
				t.Fatalf("%s: a1 down moved it to %s, want a2 (same site)", id, a)
			}
		}
		if a != b {
			moved++
			if b != "a1.example.com" {
				t.Fatalf("%s moved from %s although a1 went down", id, b)
			}
		}
	}
	if moved != onA1 || onA1 < 4000 || onA1 > 6000 {
		t.Fatalf("moved %d, on a1 %d", moved, onA1)
	}
	a := after.Decide(east, "x", "")
	if len(a.Backups) == 0 || a.Backups[0] != "b1.example.com" && a.Backups[0] != "b2.example.com" {
		t.Fatalf("backups with a1 down: %v, want b's clusters", a.Backups)
	}
}

// TestBucketMoveExact is the target: widening a bucket from 10 % to
// 20 % moves 10 % ± 0.5 % of 100 000 devices, and only from the region's
// site to the bucket's site.
func TestBucketMoveExact(t *testing.T) {
	key := testKey(t)
	t10 := twoSites()
	t20 := twoSites()
	t20.Rules[2].Bucket = &Bucket{From: 0, To: 20}
	s10, s20 := Compile(t10, nil, nil, 1, key), Compile(t20, nil, nil, 2, key)
	const n = 100000
	moved := 0
	for i := range n {
		id := fmt.Sprintf("device-%08d", i)
		a, b := s10.Decide(east, id, ""), s20.Decide(east, id, "")
		if a.Primary == b.Primary {
			continue
		}
		moved++
		if a.Rule != "region:east" || b.Rule != "bucket:shift" {
			t.Fatalf("%s moved %s -> %s: only region users may join the bucket", id, a.Rule, b.Rule)
		}
	}
	share := float64(moved) / n * 100
	t.Logf("moved %d of %d devices: %.2f %%", moved, n, share)
	if share < 9.5 || share > 10.5 {
		t.Fatalf("moved %.2f %%, want 10 ± 0.5 %%", share)
	}
}

func TestSameDeviceSameAnswer(t *testing.T) {
	key := testKey(t)
	s1, s2 := Compile(twoSites(), nil, nil, 1, key), Compile(twoSites(), nil, nil, 1, key)
	now := time.Now()
	for i := range 1000 {
		id := fmt.Sprint(i)
		if a, b := s1.Decide(east, id, ""), s2.Decide(east, id, ""); a.Primary != b.Primary || string(s1.Body(east, id, "", now)) != string(s2.Body(east, id, "", now)) {
			t.Fatalf("%s: %s vs %s", id, a.Primary, b.Primary)
		}
	}
}

func TestDecideAllocatesNothing(t *testing.T) {
	s := Compile(twoSites(), nil, nil, 1, testKey(t))
	s.Decide(east, "dev-1", "") // encode once
	if n := testing.AllocsPerRun(1000, func() { s.Decide(east, "dev-1", "c") }); n != 0 {
		t.Fatalf("Decide allocates %v per call", n)
	}
	buf := make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(100, func() { buf = s.AppendBody(buf[:0], east, "dev-1", "c", time.Unix(1e9, 0)) }); n != 0 {
		t.Fatalf("AppendBody allocates %v per call", n)
	}
}

func TestTableValidateNamesField(t *testing.T) {
	cases := map[string]func(*Table){
		"default_domain":              func(t *Table) { t.DefaultDomain = "" },
		"sites[1].name":               func(t *Table) { t.Sites[1].Name = "a" },
		"sites[0].sibling":            func(t *Table) { t.Sites[0].Sibling = "zz" },
		"sites[0].clusters[1].domain": func(t *Table) { t.Sites[0].Clusters[1].Domain = "bad domain" },
		"regions[0].cidrs[0]":         func(t *Table) { t.Regions[0].CIDRs[0] = "10.0.0.0/99" },
		"regions[2].site":             func(t *Table) { t.Regions[2].Site = "c" },
		"rules[2].bucket":             func(t *Table) { t.Rules[2].Bucket.To = 120 },
		"rules[0].bucket":             func(t *Table) { t.Rules[0].Bucket = &Bucket{To: 1} },
		"rules[1].regions[0]":         func(t *Table) { t.Rules[1].Regions = []string{"north"} },
		"rules[2].site":               func(t *Table) { t.Rules[2].Site = "" },
		"default_site":                func(t *Table) { t.DefaultSite = "q" },
	}
	for field, mut := range cases {
		tb := twoSites()
		mut(tb)
		err := tb.Validate()
		if err == nil || err.Error()[:len(field)+1] != field+":" {
			t.Errorf("%s: got %v", field, err)
		}
	}
}

// TestBucketHashIsStable pins the bucket hash: a user's slot must not move
// between releases (changing hashID would move every bucketed user).
func TestBucketHashIsStable(t *testing.T) {
	got := []uint64{hashID("s1", "device-1") % Slots, hashID("", "42") % Slots, hashID("bank-2026", "c-7") % Slots}
	want := []uint64{808, 4911, 1639}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("slots %v, pinned %v", got, want)
	}
}

func TestClientAddr(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	cases := []struct {
		remote string
		xff    []string
		want   string
	}{
		{"192.0.2.1:5000", []string{"198.51.100.9"}, "192.0.2.1"},                          // untrusted peer: header ignored
		{"10.1.1.1:5000", []string{"198.51.100.9"}, "198.51.100.9"},                        // via the LB
		{"10.1.1.1:5000", []string{"203.0.113.5, 198.51.100.9, 10.2.2.2"}, "198.51.100.9"}, // right-most untrusted
		{"10.1.1.1:5000", []string{"203.0.113.5", "10.9.9.9"}, "203.0.113.5"},              // several headers
		{"10.1.1.1:5000", []string{"junk, 10.9.9.9"}, "10.1.1.1"},                          // malformed: the connection
		{"10.1.1.1:5000", nil, "10.1.1.1"},
		{"[::1]:5000", []string{"::ffff:192.0.2.7"}, "192.0.2.7"},
	}
	for _, c := range cases {
		r, _ := http.NewRequest("POST", "/v1/route", nil)
		r.RemoteAddr = c.remote
		for _, v := range c.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		if got := clientAddr(r, trusted); got.String() != c.want {
			t.Errorf("%s %v: %s, want %s", c.remote, c.xff, got, c.want)
		}
	}
}

// TestAnswersAlwaysCarryABackup: the answers of a site outage are the ones a
// client needs a backup in most (issue 27: "backups": [] there made
// failover.NewTransport refuse the README's client). With one cluster a
// site, nothing else is up when a site is down.
func TestAnswersAlwaysCarryABackup(t *testing.T) {
	oneEach := &Table{
		DefaultDomain: "wap.example.com",
		Regions:       []Region{{Name: "east", CIDRs: []string{"10.0.0.0/8"}, Site: "a"}},
		Sites: []Site{
			{Name: "a", Sibling: "b", Clusters: []Cluster{{"a1", "a1.example.com"}}},
			{Name: "b", Sibling: "a", Clusters: []Cluster{{"b1", "b1.example.com"}}},
		},
	}
	lonely := &Table{
		DefaultDomain: "wap.example.com",
		Regions:       []Region{{Name: "east", CIDRs: []string{"10.0.0.0/8"}, Site: "a"}},
		Sites:         []Site{{Name: "a", Clusters: []Cluster{{"a1", "a1.example.com"}}}},
	}
	steps := []struct {
		name    string
		tb      *Table
		st      State
		em      Emergency
		primary string
		backups []string
	}{
		{"all up: the sibling", oneEach, State{}, Emergency{}, "a1.example.com", []string{"b1.example.com"}},
		{"site down: the down site, whatever its state", oneEach, State{SitesDown: []string{"a"}}, Emergency{}, "b1.example.com", []string{"a1.example.com"}},
		{"cluster down: same", oneEach, State{ClustersDown: []string{"a/a1"}}, Emergency{}, "b1.example.com", []string{"a1.example.com"}},
		{"every site down: each site's first domain", oneEach, State{SitesDown: []string{"a", "b"}}, Emergency{}, "wap.example.com", []string{"a1.example.com", "b1.example.com"}},
		{"no sibling: the default domain", lonely, State{}, Emergency{}, "a1.example.com", []string{"wap.example.com"}},
		{"no sibling, site down", lonely, State{SitesDown: []string{"a"}}, Emergency{}, "wap.example.com", []string{"a1.example.com"}},
		{"override without backups", oneEach, State{}, Emergency{Global: &Override{Primary: "sorry.example.com"}}, "sorry.example.com", []string{"wap.example.com"}},
		{"override keeps its backups", oneEach, State{}, Emergency{Global: &Override{Primary: "sorry.example.com", Backups: []string{"b1.example.com"}}}, "sorry.example.com", []string{"b1.example.com"}},
		{"override to a site that is down", oneEach, State{SitesDown: []string{"b"}}, Emergency{Global: &Override{Site: "b"}}, "a1.example.com", []string{"b1.example.com"}},
	}
	key := testKey(t)
	for _, st := range steps {
		if err := st.tb.Validate(); err != nil {
			t.Fatal(err)
		}
		s := Compile(st.tb, &st.st, &st.em, 1, key)
		a := s.Decide(east, "dev-1", "")
		if a.Primary != st.primary || fmt.Sprint(a.Backups) != fmt.Sprint(st.backups) {
			t.Errorf("%s: %s %v, want %s %v", st.name, a.Primary, a.Backups, st.primary, st.backups)
		}
		got, err := routing.VerifyFor(s.Body(east, "dev-1", "", time.Unix(1e9, 0)), []ed25519.PublicKey{s.PublicKey()}, "dev-1", time.Unix(1e9, 0))
		if err != nil || fmt.Sprint(got.Backups) != fmt.Sprint(st.backups) {
			t.Errorf("%s: signed body %+v %v", st.name, got, err)
		}
	}
}
