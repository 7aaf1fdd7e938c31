package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/veerhq/veer/store"
	"github.com/veerhq/veer/store/storeetcd"
	"github.com/veerhq/veer/store/storeetcd/etcdtest"
)

func TestDNSCheckControlStore(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte("listen: 127.0.0.1:0\ncontrol_store:\n  endpoints: [http://127.0.0.1:2379]\n"), 0o644)
	out, err := run(t, "dns", "--check", good)
	if err != nil || !strings.Contains(out, "data from the control store [http://127.0.0.1:2379] (dns/zones, access/nodes)") {
		t.Fatalf("check: %q %v", out, err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("listen: 127.0.0.1:0\ncontrol_store:\n  endpoints: [127.0.0.1:2379]\n"), 0o644)
	if _, err := run(t, "dns", "--check", bad); err == nil || !strings.Contains(err.Error(), "bad.yaml:3: control_store.endpoints[0]:") {
		t.Fatalf("check bad: %v, want file:line: field", err)
	}
}

// TestDNSServeControlStore runs `veer dns --config` with a control_store on
// a real etcd: it answers the access nodes written there, follows a node
// marked down, and keeps the store's data when the config file reloads.
func TestDNSServeControlStore(t *testing.T) {
	etcd := etcdtest.New(t)
	st, err := storeetcd.New(storeetcd.Config{Endpoints: []string{etcd.URL}}, storeetcd.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	put := func(key, v string) {
		t.Helper()
		if _, err := st.Put(context.Background(), key, []byte(v), store.Write{Author: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	put("dns/zones", "zones: [{origin: a.test., access: [{name: edge, ttl: 5}]}]\n")
	put("access/nodes", `{"default": [{"addr": "10.0.0.1:443"}, {"addr": "10.0.0.2:443"}]}`)

	path := filepath.Join(t.TempDir(), "dns.yaml")
	conf := fmt.Sprintf("listen: 127.0.0.1:0\nudp_size: 1232\ncontrol_store:\n  endpoints: [%s]\n", etcd.URL)
	os.WriteFile(path, []byte(conf), 0o644)
	root := newRoot()
	pr, pw := io.Pipe()
	root.SetOut(pw)
	root.SetErr(io.Discard)
	root.SetArgs([]string{"dns", "--config", path, "--log-level", "error"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx); pw.Close() }()
	var addr string
	sc := bufio.NewScanner(pr)
	for addr == "" && sc.Scan() {
		if a, ok := strings.CutPrefix(sc.Text(), "veer dns: udp+tcp "); ok {
			addr = a
		}
	}
	go io.Copy(io.Discard, pr)
	if addr == "" {
		cancel()
		t.Fatalf("no address printed: %v", <-done)
	}
	answers := func() string {
		q := new(dns.Msg)
		q.SetQuestion("edge.a.test.", dns.TypeA)
		r, err := dns.Exchange(q, addr)
		if err != nil {
			t.Fatalf("query: %v", err)
		}
		var as []string
		for _, rr := range r.Answer {
			as = append(as, rr.(*dns.A).A.String())
		}
		if len(as) == 2 && as[0] > as[1] {
			as[0], as[1] = as[1], as[0]
		}
		return strings.Join(as, ",")
	}
	wait := func(want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for got := answers(); got != want; got = answers() { // each try is a real round trip
			if time.Now().After(deadline) {
				t.Fatalf("answers %q, want %q within 10s", got, want)
			}
		}
	}
	wait("10.0.0.1,10.0.0.2")
	put("access/nodes", `{"default": [{"addr": "10.0.0.1:443"}, {"addr": "10.0.0.2:443", "down": true}]}`)
	wait("10.0.0.1")
	// A reload of the file (a new UDP size) keeps the store's data.
	os.WriteFile(path, []byte(strings.Replace(conf, "1232", "1400", 1)), 0o644)
	deadline := time.Now().Add(10 * time.Second)
	for {
		q := new(dns.Msg)
		q.SetQuestion("edge.a.test.", dns.TypeA)
		q.SetEdns0(4096, false)
		r, err := dns.Exchange(q, addr)
		if err != nil {
			t.Fatal(err)
		}
		if o := r.IsEdns0(); o != nil && o.UDPSize() == 1400 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the reloaded file was not applied within 10s")
		}
	}
	if got := answers(); got != "10.0.0.1" {
		t.Fatalf("after the file reload: answers %q, want the store's 10.0.0.1", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
