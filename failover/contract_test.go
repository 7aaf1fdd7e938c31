package failover

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/veerhq/veer/outcome"
)

// The Policy contract, checked over every implementation with event
// sequences decoded from bytes (random in TestPolicyContract, fuzzed in
// FuzzPolicyContract):
//
//   - Domain() is in [0, n]; Canary is None or in [0, n];
//   - PRIMARY and FAILOVER use the primary, BACKUP and RECOVERY a backup;
//   - every change of State() or Domain() comes with a Transition whose To
//     and Domain match, and a Transition always changes something;
//   - a stale report (another domain) or a ClientCanceled one changes
//     nothing, and no reachable-server outcome moves traffic away;
//   - a canary result nobody asked for changes nothing.
func checkContract(t *testing.T, name string, p Policy, n int, data []byte) map[State]bool {
	visited := map[State]bool{}
	kinds := outcome.Kinds()
	now := t0
	p.Start(now, None)
	asked := map[int]bool{}
	lastAsked := None
	for i := 0; i+2 < len(data); i += 3 {
		op, arg, k := data[i], int(data[i+1])%(n+2)-1, kinds[int(data[i+2])%len(kinds)]
		now = now.Add(time.Duration(data[i+2]) * 100 * time.Millisecond)
		state, domain := p.State(), p.Domain()
		var a Action
		stale, reachable, unasked := false, false, false
		switch op % 6 {
		case 0, 1, 2: // regular outcomes are the most frequent
			d := domain
			if op%6 == 2 {
				d = arg
			}
			stale = d != domain || k == outcome.ClientCanceled
			reachable = !k.Unreachable()
			a = p.Report(now, d, outcome.Of(k))
		case 3:
			if data[i+1]%2 == 0 && lastAsked != None {
				arg = lastAsked // mostly answer the canary asked for
			}
			if data[i+2]%3 == 0 {
				k = outcome.Success
			}
			unasked = !asked[arg]
			a = p.CanaryDone(now, arg, outcome.Of(k))
			delete(asked, arg)
		case 4:
			a = p.Tick(now)
		case 5:
			a = p.NetworkChanged(now)
		}
		if a.Canary != None {
			asked[a.Canary] = true
			lastAsked = a.Canary
		}
		where := func() string { return name + " after event " + string(rune('0'+op%6)) }
		d := p.Domain()
		if d < 0 || d > n {
			t.Fatalf("%s: domain %d out of range", where(), d)
		}
		if a.Canary < None || a.Canary > n {
			t.Fatalf("%s: canary %d out of range", where(), a.Canary)
		}
		switch s := p.State(); {
		case (s == Primary || s == Failover) && d != PrimaryIndex,
			(s == Backup || s == Recovery) && d == PrimaryIndex:
			t.Fatalf("%s: state %v on domain %d", where(), s, d)
		}
		tr := a.Transition
		changed := p.State() != state || d != domain
		if changed && (!tr.Changed() || tr.To != p.State() || tr.Domain != d || tr.From != state) {
			t.Fatalf("%s: %v on %d -> %v on %d reported as %+v", where(), state, domain, p.State(), d, tr)
		}
		if tr.Changed() && !changed {
			t.Fatalf("%s: transition %+v without a change", where(), tr)
		}
		if (stale || unasked) && changed {
			t.Fatalf("%s: stale, cancelled or unasked outcome changed %v on %d to %v on %d", where(), state, domain, p.State(), d)
		}
		if reachable && !stale && d != domain && d != PrimaryIndex {
			t.Fatalf("%s: a reachable-server outcome moved traffic from %d to %d", where(), domain, d)
		}
		visited[p.State()] = true
	}
	return visited
}

func contractPolicies(t *testing.T) map[string]Policy {
	out := map[string]Policy{}
	for name, mk := range policies() {
		out[name] = mk(t)
	}
	offline := testConfig()
	offline.DeviceOfflineCheck = true
	p, err := NewUber(offline)
	if err != nil {
		t.Fatal(err)
	}
	out["uber_offline_check"] = p
	return out
}

func TestPolicyContract(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 30000)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	// bias towards network failures so that every state is visited
	for i := 2; i < len(data); i += 3 {
		if data[i]%2 == 0 {
			data[i] = byte(outcome.ConnectRefused)
		}
	}
	for name, p := range contractPolicies(t) {
		visited := checkContract(t, name, p, 2, data)
		want := 2
		if _, ok := p.(*Uber); ok {
			want = 4
		}
		if len(visited) != want {
			t.Errorf("%s visited %v, want %d states: the event mix is too weak", name, visited, want)
		}
	}
}

func FuzzPolicyContract(f *testing.F) {
	f.Add([]byte{0, 0, 4, 0, 0, 4, 0, 0, 4, 3, 2, 0, 4, 0, 100, 3, 1, 0})
	f.Add([]byte{5, 0, 0, 2, 3, 4, 3, 0, 5, 4, 0, 255})
	f.Fuzz(func(t *testing.T, data []byte) {
		for name, p := range contractPolicies(t) {
			checkContract(t, name, p, 2, data)
		}
	})
}
