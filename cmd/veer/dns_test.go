package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestDNSCheck(t *testing.T) {
	out, err := run(t, "dns", "--check", "../../examples/dns.yaml")
	if err != nil || !strings.Contains(out, "OK: 1 zones, 5 records, 1 access domains with 4 nodes, 3 region rows") {
		t.Fatalf("check example: %q %v", out, err)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("zones:\n  - origin: a.test.\n    records: ['www A 300.1.1.1']\n"), 0o644)
	if _, err := run(t, "dns", "--check", bad); err == nil || !strings.Contains(err.Error(), "bad.yaml:3: zones[0].records[0]:") {
		t.Fatalf("check bad: %v, want file:line: field", err)
	}
	if _, err := run(t, "dns"); err == nil {
		t.Fatal("dns without --config or --check accepted")
	}
}

// TestDNSServe runs `veer dns --config` in-process: it answers, reloads a
// changed file without a restart, serves metrics, and stops on cancel.
func TestDNSServe(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dns.yaml")
	conf := "listen: 127.0.0.1:0\nzones: [{origin: a.test., records: ['www A 192.0.2.1']}]\n"
	os.WriteFile(path, []byte(conf), 0o644)
	root := newRoot()
	pr, pw := io.Pipe()
	root.SetOut(pw)
	root.SetErr(io.Discard)
	root.SetArgs([]string{"dns", "--config", path, "--metrics", "127.0.0.1:0", "--log-level", "error"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx); pw.Close() }()
	var addr, metrics string
	sc := bufio.NewScanner(pr)
	for (addr == "" || metrics == "") && sc.Scan() {
		line := sc.Text()
		if a, ok := strings.CutPrefix(line, "veer dns: udp+tcp "); ok {
			addr = a
		}
		if a, ok := strings.CutPrefix(line, "veer dns: metrics "); ok {
			metrics = a
		}
	}
	go io.Copy(io.Discard, pr)
	if addr == "" || metrics == "" {
		cancel()
		t.Fatalf("no addresses printed: %v", <-done)
	}
	answer := func() string {
		q := new(dns.Msg)
		q.SetQuestion("www.a.test.", dns.TypeA)
		r, err := dns.Exchange(q, addr)
		if err != nil || len(r.Answer) != 1 {
			t.Fatalf("query: %v %v", r, err)
		}
		return r.Answer[0].(*dns.A).A.String()
	}
	if got := answer(); got != "192.0.2.1" {
		t.Fatalf("answer %s", got)
	}
	os.WriteFile(path, []byte(strings.Replace(conf, "192.0.2.1", "192.0.2.2", 1)), 0o644)
	deadline := time.Now().Add(10 * time.Second)
	for answer() != "192.0.2.2" { // each try is a real round trip
		if time.Now().After(deadline) {
			t.Fatal("the changed file was not served within 10s")
		}
	}
	resp, err := http.Get(metrics)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`veer_dnsserver_queries_total{qtype="A",rcode="NOERROR",transport="udp"}`, `veer_dnsserver_reloads_total{result="ok"} 1`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
