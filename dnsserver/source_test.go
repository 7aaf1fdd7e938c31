package dnsserver

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestFileSource serves a data file, changes it, breaks it, fixes it.
func TestFileSource(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "data.yaml")
	writeFile(t, path, "zones: [{origin: a.test., records: ['www A 192.0.2.1']}]\n")
	s := startServer(t, Config{Listen: "127.0.0.1:0"}, Options{})
	applied := make(chan error, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- FileSource{Path: path, Logger: discard(), Registerer: nilRegistry()}.Run(ctx, func(d Data) error {
			err := s.SetData(d)
			applied <- err
			return err
		})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	wait := func() error {
		select {
		case err := <-applied:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("no apply within 10s")
			return nil
		}
	}
	answer := func(name string) string {
		r := ask(t, "udp", s.Addr(), name, dns.TypeA, 0)
		if len(r.Answer) == 0 {
			return dns.RcodeToString[r.Rcode]
		}
		return r.Answer[0].(*dns.A).A.String()
	}
	if err := wait(); err != nil || answer("www.a.test.") != "192.0.2.1" {
		t.Fatalf("initial: %v %s", err, answer("www.a.test."))
	}
	writeFile(t, path, "zones: [{origin: a.test., records: ['www A 192.0.2.2']}]\n")
	if err := wait(); err != nil || answer("www.a.test.") != "192.0.2.2" {
		t.Fatalf("after change: %v %s", err, answer("www.a.test."))
	}
	// A file that does not validate never reaches apply; one that validates
	// as a file but is refused by the server would. Break it, then fix it:
	// the next apply is the fixed version, and the old data served meanwhile.
	writeFile(t, path, "zones: [{origin: a.test., records: ['www A nope']}]\n")
	if got := answer("www.a.test."); got != "192.0.2.2" {
		t.Errorf("while broken: %s, want the old 192.0.2.2", got)
	}
	writeFile(t, path, "zones: [{origin: a.test., records: ['www A 192.0.2.3']}]\n")
	if err := wait(); err != nil || !strings.Contains(answer("www.a.test."), "192.0.2.3") {
		t.Fatalf("after fix: %v %s", err, answer("www.a.test."))
	}
}
