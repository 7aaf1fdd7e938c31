package dns

import (
	"strings"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/dnsserver"
)

func TestParseDNSPerf(t *testing.T) {
	out := `Statistics:

  Queries sent:         537289
  Queries completed:    537282 (100.00%)
  Queries lost:         7 (0.00%)

  Response codes:       NOERROR 510418 (95.00%), NXDOMAIN 26864 (5.00%)
  Average packet size:  request 38, response 70
  Run time (s):         5.000134
  Queries per second:   107453.520306
`
	r, err := ParseDNSPerf(out)
	if err != nil || r.Sent != 537289 || r.Completed != 537282 || r.Lost != 7 || r.QPS != 107453.520306 {
		t.Fatalf("%+v %v", r, err)
	}
	if _, err := ParseDNSPerf("garbage"); err == nil {
		t.Fatal("garbage parsed")
	}
	r.ServerCPU = 537282 * 6 * time.Microsecond
	if r.CPUPerQuery() != 6*time.Microsecond {
		t.Errorf("CPU per query %v", r.CPUPerQuery())
	}
}

// TestZoneSame checks that the three servers get the same zone: the master
// file parses with miekg/dns's zone parser and the veer config validates,
// with the same number of records.
func TestZoneSame(t *testing.T) {
	z := Zone{Names: 100}
	zp := mdns.NewZoneParser(strings.NewReader(z.ZoneFile()), "", "")
	n := 0
	for _, ok := zp.Next(); ok; _, ok = zp.Next() {
		n++
	}
	if err := zp.Err(); err != nil {
		t.Fatal(err)
	}
	var c dnsserver.Config
	if err := config.Parse([]byte(z.VeerConfig("127.0.0.1:53")), "veer.yaml", &c); err != nil {
		t.Fatal(err)
	}
	if want := len(c.Zones[0].Records) + 2; n != want { // + SOA and NS
		t.Errorf("zone file has %d records, veer config %d", n, want)
	}
	q := z.Queries(1000, 1)
	if lines := strings.Count(q, "\n"); lines != 1000 || q != z.Queries(1000, 1) {
		t.Errorf("queries: %d lines or not deterministic", lines)
	}
}
