package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/veerhq/veer/control"
	"github.com/veerhq/veer/dnsserver"
)

// routingTable is a veer control routing table file: 127.0.0.0/8 is in
// region west.
const routingTable = `default_domain: wap.example.com
regions:
  - {name: east, cidrs: [10.1.0.0/16, 2001:db8::/32], site: a}
  - {name: west, cidrs: [127.0.0.0/8], site: b}
sites:
  - {name: a, sibling: b, clusters: [{name: a1, domain: a1.example.com}]}
  - {name: b, sibling: a, clusters: [{name: b1, domain: b1.example.com}]}
`

// TestDNSRegionsFileIsControlsTable: `veer dns` with regions_file names
// the routing table file veer control takes, and places clients by its
// regions: a query from 127.0.0.1 gets the west nodes only.
func TestDNSRegionsFileIsControlsTable(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "table.yaml"), []byte(routingTable), 0o644)
	if _, err := control.ValidateDocument(control.KeyTable, []byte(routingTable)); err != nil {
		t.Fatalf("the table is not one veer control takes: %v", err)
	}
	conf := filepath.Join(dir, "dns.yaml")
	os.WriteFile(conf, []byte(`listen: 127.0.0.1:0
regions_file: table.yaml   # relative to this file
zones:
  - origin: a.test.
    access:
      - name: api
        nodes: [{addr: 192.0.2.11, region: east}, {addr: 192.0.2.21, region: west}, {addr: 192.0.2.22, region: west}]
`), 0o644)
	out, err := run(t, "dns", "--check", conf)
	if err != nil || !strings.Contains(out, "1 access domains with 3 nodes, 3 region rows") {
		t.Fatalf("check: %q %v", out, err)
	}
	root := newRoot()
	pr, pw := io.Pipe()
	root.SetOut(pw)
	root.SetErr(io.Discard)
	root.SetArgs([]string{"dns", "--config", conf, "--log-level", "error", "--metrics", "127.0.0.1:0"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx); pw.Close() }()
	var addr, metrics string
	sc := bufio.NewScanner(pr)
	for (addr == "" || metrics == "") && sc.Scan() {
		if a, ok := strings.CutPrefix(sc.Text(), "veer dns: udp+tcp "); ok {
			addr = a
		}
		if m, ok := strings.CutPrefix(sc.Text(), "veer dns: metrics "); ok {
			metrics = m
		}
	}
	go io.Copy(io.Discard, pr)
	if addr == "" {
		cancel()
		t.Fatalf("no address printed: %v", <-done)
	}
	answer := func() []string {
		q := new(dns.Msg)
		q.SetQuestion("api.a.test.", dns.TypeA)
		r, err := dns.Exchange(q, addr)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, rr := range r.Answer {
			got = append(got, rr.(*dns.A).A.String())
		}
		slices.Sort(got)
		return got
	}
	if got := answer(); !slices.Equal(got, []string{"192.0.2.21", "192.0.2.22"}) {
		t.Fatalf("answer for 127.0.0.1 (west in the table): %v", got)
	}
	// The table file alone changes (the config file does not): an invalid
	// version keeps the regions in force, a valid one moving loopback to
	// east is followed. Each write is seen by the watcher; the answer is
	// asked until it moves (a bounded number of reloads, not a sleep).
	os.WriteFile(filepath.Join(dir, "table.yaml"), []byte(strings.Replace(routingTable, "127.0.0.0/8", "127.0.0.0/33", 1)), 0o644)
	moved := strings.Replace(strings.Replace(routingTable, "10.1.0.0/16, 2001:db8::/32", "10.1.0.0/16, 127.0.0.0/8", 1), "cidrs: [127.0.0.0/8]", "cidrs: [10.2.0.0/16]", 1)
	if _, err := control.ValidateDocument(control.KeyTable, []byte(moved)); err != nil {
		t.Fatal(err)
	}
	// veer dns is another goroutine's process here: its reload counter
	// says when a version was taken or refused.
	waitReloads := func(result string, n int) {
		t.Helper()
		want := fmt.Sprintf(`veer_config_reloads_total{config="dns-regions",result=%q} %d`, result, n)
		deadline := time.Now().Add(10 * time.Second)
		for {
			r, err := http.Get(metrics)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(r.Body)
			r.Body.Close()
			if strings.Contains(string(b), want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %s within 10 s", want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitReloads("invalid", 1)
	if got := answer(); !slices.Equal(got, []string{"192.0.2.21", "192.0.2.22"}) {
		t.Fatalf("after an invalid table: %v, want west's nodes still", got)
	}
	os.WriteFile(filepath.Join(dir, "table.yaml"), []byte(moved), 0o644)
	waitReloads("ok", 1)
	if got := answer(); !slices.Equal(got, []string{"192.0.2.11"}) {
		t.Fatalf("after the table file alone moved 127.0.0.0/8 to east: %v, want east's node", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestDNSRegionsFileErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(s), 0o644)
		return p
	}
	write("table.yaml", routingTable)
	write("bad-table.yaml", "default_domain: wap.example.com\nsites: [{name: a, clusters: [{name: a1, domain: a1.example.com}]}]\nregions:\n  - {name: east, cidrs: [10.1.0.0/33], site: a}\n")
	zones := "zones: [{origin: a.test., records: ['www A 192.0.2.1']}]\n"
	cases := []struct{ name, conf, want string }{
		{"both", "regions_file: table.yaml\nregions: [{cidr: 10.0.0.0/8, region: x}]\n" + zones, "both.yaml:1: regions_file: regions and regions_file both set"},
		{"missing", "regions_file: nope.yaml\n" + zones, "nope.yaml: no such file"},
		{"bad", "regions_file: bad-table.yaml\n" + zones, "bad-table.yaml:4: regions[0].cidrs[0]"},
	}
	for _, c := range cases {
		_, err := run(t, "dns", "--check", write(c.name+".yaml", c.conf))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// FuzzTableRegions: every routing table veer control accepts gives region
// rows the DNS accepts, one per CIDR, named by its region.
func FuzzTableRegions(f *testing.F) {
	f.Add([]byte(routingTable))
	f.Add([]byte("default_domain: w.example.com\nregions: [{name: r, cidrs: ['::/0', 0.0.0.0/0]}]\n"))
	f.Add([]byte("default_domain: w.example.com\nregions: [{name: r, cidrs: [10.0.0.1/8]}]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := control.ValidateDocument(control.KeyTable, b)
		if err != nil {
			return
		}
		tb := v.(*control.Table)
		rows := tableRegions(tb)
		n := 0
		for _, r := range tb.Regions {
			for _, c := range r.CIDRs {
				if rows[n].CIDR != c || rows[n].Region != r.Name {
					t.Fatalf("row %d: %+v, want %s %s", n, rows[n], c, r.Name)
				}
				n++
			}
		}
		if n != len(rows) {
			t.Fatalf("%d rows for %d CIDRs", len(rows), n)
		}
		if err := (dnsserver.Data{Regions: rows}).Validate(); err != nil {
			t.Fatalf("control accepts %q, the DNS refuses its regions: %v", b, err)
		}
	})
}
