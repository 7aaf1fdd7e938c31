package dnsfile_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/veerhq/veer/dnsserver"
	"github.com/veerhq/veer/dnsserver/dnsfile"
	"github.com/veerhq/veer/obs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestSource serves a data file, changes it, breaks it, fixes it.
func TestSource(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data.yaml")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("zones: [{origin: a.test., records: ['www A 192.0.2.1']}]\n")
	s, err := dnsserver.New(dnsserver.Config{Listen: "127.0.0.1:0"}, dnsserver.Options{Registerer: prometheus.NewRegistry(), Logger: obs.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	applied := make(chan error, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	src := dnsfile.Source{Path: path, Logger: obs.Discard, Registerer: prometheus.NewRegistry()}
	go func() {
		done <- src.Run(ctx, func(d dnsserver.Data) error {
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
	answer := func() string {
		q := new(dns.Msg)
		q.SetQuestion("www.a.test.", dns.TypeA)
		r, err := dns.Exchange(q, s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Answer) == 0 {
			return dns.RcodeToString[r.Rcode]
		}
		return r.Answer[0].(*dns.A).A.String()
	}
	if err := wait(); err != nil || answer() != "192.0.2.1" {
		t.Fatalf("initial: %v %s", err, answer())
	}
	write("zones: [{origin: a.test., records: ['www A 192.0.2.2']}]\n")
	if err := wait(); err != nil || answer() != "192.0.2.2" {
		t.Fatalf("after change: %v %s", err, answer())
	}
	// A version that does not validate never reaches apply: the old data
	// serves until the file is fixed.
	write("zones: [{origin: a.test., records: ['www A nope']}]\n")
	if got := answer(); got != "192.0.2.2" {
		t.Errorf("while broken: %s, want the old 192.0.2.2", got)
	}
	write("zones: [{origin: a.test., records: ['www A 192.0.2.3']}]\n")
	if err := wait(); err != nil || answer() != "192.0.2.3" {
		t.Fatalf("after fix: %v %s", err, answer())
	}
}

// TestSourceBadFile: the initial load's error names the file and line.
func TestSourceBadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data.yaml")
	os.WriteFile(path, []byte("zones:\n  - origin: a.test.\n    records: ['www A nope']\n"), 0o644)
	err := dnsfile.Source{Path: path, Logger: obs.Discard, Registerer: prometheus.NewRegistry()}.Run(context.Background(), func(dnsserver.Data) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "data.yaml:3: zones[0].records[0]") {
		t.Fatalf("Run = %v, want file:line: field", err)
	}
}
