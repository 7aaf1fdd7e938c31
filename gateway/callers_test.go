package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/tier"
)

// TestCallerLogSteps drives the callers log on a manual clock: requests
// land in one-minute buckets, a bucket is reused when its minute comes
// round again, the window is the last hour, and an endpoint keeps at most
// CallersPerEndpoint callers (the rest counted as "other", silent callers
// making room).
func TestCallerLogSteps(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC))
	var l callerLog
	type cc = CallerCount
	steps := []struct {
		name    string
		advance time.Duration
		ep      string
		caller  string
		n       int
		want    map[string][]cc // endpoint -> callers
	}{
		{name: "first requests", ep: "api", caller: "rider-app", n: 3,
			want: map[string][]cc{"api": {{Caller: "rider-app", Count: 3}}}},
		{name: "same minute, another caller", advance: 30 * time.Second, ep: "api", caller: "batch", n: 5,
			want: map[string][]cc{"api": {{Caller: "batch", Count: 5}, {Caller: "rider-app", Count: 3}}}},
		{name: "no caller is not counted", ep: "api", caller: "", n: 7,
			want: map[string][]cc{"api": {{Caller: "batch", Count: 5}, {Caller: "rider-app", Count: 3}}}},
		{name: "next minute adds a bucket", advance: time.Minute, ep: "api", caller: "rider-app", n: 4,
			want: map[string][]cc{"api": {{Caller: "rider-app", Count: 7}, {Caller: "batch", Count: 5}}}},
		{name: "endpoints apart", ep: "search", caller: "rider-app", n: 1,
			want: map[string][]cc{"api": {{Caller: "rider-app", Count: 7}, {Caller: "batch", Count: 5}}, "search": {{Caller: "rider-app", Count: 1}}}},
		// t = 04:01:30. At 05:00:00 the minute-0 bucket (rider-app 3, batch 5) is an hour old.
		{name: "04:59:59 still counts minute 0", advance: 58*time.Minute + 29*time.Second,
			want: map[string][]cc{"api": {{Caller: "rider-app", Count: 7}, {Caller: "batch", Count: 5}}, "search": {{Caller: "rider-app", Count: 1}}}},
		{name: "05:00:00 minute 0 left the window", advance: time.Second,
			want: map[string][]cc{"api": {{Caller: "rider-app", Count: 4}}, "search": {{Caller: "rider-app", Count: 1}}}},
		{name: "minute 0's bucket reused, old count gone", ep: "api", caller: "batch", n: 2,
			want: map[string][]cc{"api": {{Caller: "rider-app", Count: 4}, {Caller: "batch", Count: 2}}, "search": {{Caller: "rider-app", Count: 1}}}},
		{name: "an hour of silence empties the log", advance: time.Hour,
			want: map[string][]cc{}},
	}
	for _, s := range steps {
		clk.Advance(s.advance)
		for range s.n {
			l.observe(clk.Now(), s.ep, s.caller)
		}
		got := map[string][]cc{}
		for _, e := range l.report(clk.Now(), nil).Endpoints {
			got[e.Endpoint] = e.Callers
		}
		if !reflect.DeepEqual(got, s.want) {
			t.Fatalf("%s (%s): got %v, want %v", s.name, clk.Now().Format(time.TimeOnly), got, s.want)
		}
	}
}

// TestCallerLogBound: past CallersPerEndpoint callers, new callers count as
// "other"; once the old callers are silent for an hour, new ones get
// their own row again.
func TestCallerLogBound(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC))
	var l callerLog
	for i := range CallersPerEndpoint + 5 {
		l.observe(clk.Now(), "api", fmt.Sprintf("c%03d", i))
	}
	l.observe(clk.Now(), "api", "c000") // a kept caller still counts as itself
	cs := l.report(clk.Now(), nil).Endpoints[0].Callers
	if len(cs) != CallersPerEndpoint+1 {
		t.Fatalf("%d rows, want %d callers and other", len(cs), CallersPerEndpoint)
	}
	if cs[0] != (CallerCount{Caller: "c000", Count: 2}) || cs[len(cs)-1] != (CallerCount{Caller: OtherCallers, Count: 5}) {
		t.Fatalf("first %v, last %v; want c000 2 and other 5", cs[0], cs[len(cs)-1])
	}
	clk.Advance(CallersWindow)
	l.observe(clk.Now(), "api", "newcomer")
	cs = l.report(clk.Now(), nil).Endpoints[0].Callers
	if want := []CallerCount{{Caller: "newcomer", Count: 1}}; !reflect.DeepEqual(cs, want) {
		t.Fatalf("after an hour: %v, want %v", cs, want)
	}
}

// TestCallersThroughGateway sends requests with Rpc-Caller through a real
// gateway from a trusted network and reads GET /admin/callers on its admin
// listener (no token: it is open like /metrics): counts per route and
// caller, the tier the shed table gives each, and an untrusted client's
// Rpc-Caller (stripped) not counted.
func TestCallersThroughGateway(t *testing.T) {
	a, _ := echoUpstream(t, "a")
	cfg := parseConfig(t, fill(`admin: {addr: 127.0.0.1:0, token: s3cret}
shed:
  enabled: true
  endpoints: [{name: api, callers: {rider-app: critical}}]
trusted_networks: [127.0.0.0/8]
routes:
- {name: api, path_prefix: /api, clusters: [{name: a}]}
- {name: web, clusters: [{name: a}]}
clusters: [{name: a, backends: [{address: A}]}]
`, "A", a))
	g := startGatewayOpts(t, cfg, Options{})
	base := "http://" + g.Addrs().Plain
	cl := &http.Client{}
	for range 3 {
		get(t, cl, base+"/api/x", tier.CallerHeader, "rider-app")
	}
	get(t, cl, base+"/api/x", tier.CallerHeader, "batch")
	get(t, cl, base+"/api/x") // no caller
	get(t, cl, base+"/page", tier.CallerHeader, "rider-app")
	get(t, cl, base+"/page", tier.CallerHeader, strings.Repeat("x", tier.MaxCallerLen+1)) // too long: dropped

	resp, body := get(t, cl, "http://"+g.Addrs().Admin+"/admin/callers")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /admin/callers: %s %s %s", resp.Status, resp.Header.Get("Content-Type"), body)
	}
	var got CallersReport
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	want := CallersReport{Endpoints: []EndpointCallers{
		{Endpoint: "api", Callers: []CallerCount{{Caller: "rider-app", Count: 3, Tier: "critical"}, {Caller: "batch", Count: 1, Tier: "sheddable_plus"}}},
		{Endpoint: "web", Callers: []CallerCount{{Caller: "rider-app", Count: 1, Tier: "sheddable_plus"}}},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

// BenchmarkCallerObserve: the callers log's cost per request at shed
// admission (an RWMutex read, the endpoint's mutex, a bucket add), from
// all procs on one endpoint and four callers, beside the cheapest count
// there is (one atomic add, /atomic-baseline).
func BenchmarkCallerObserve(b *testing.B) {
	now := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	callers := []string{"rider-app", "batch", "checkout", "search"}
	b.Run("callerlog", func(b *testing.B) {
		var l callerLog
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for i := 0; pb.Next(); i++ {
				l.observe(now, "api", callers[i&3])
			}
		})
	})
	b.Run("atomic-baseline", func(b *testing.B) {
		var n atomic.Uint64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				n.Add(1)
			}
		})
	})
}
