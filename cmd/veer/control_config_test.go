package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestControlClientReadsServiceConfig: the client subcommands given the
// service's --config find its admin API (admin_listen) and its token
// (data_dir/admin.token), with no --server or --token-file, from a
// directory where no veer-data exists.
func TestControlClientReadsServiceConfig(t *testing.T) {
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0") // a free port for admin_listen: the client reads it from the file
	if err != nil {
		t.Fatal(err)
	}
	adminAddr := l.Addr().String()
	l.Close()
	cfg := filepath.Join(dir, "control.yaml")
	os.WriteFile(cfg, []byte("data_dir: "+filepath.Join(dir, "state")+"\nlisten: 127.0.0.1:0\nadmin_listen: "+adminAddr+"\n"), 0o600)
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		root := newRoot()
		root.SetOut(pw)
		root.SetErr(pw)
		root.SetArgs([]string{"control", "--config", cfg})
		done <- root.ExecuteContext(ctx)
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	started := false
	for !started && sc.Scan() {
		started = strings.Contains(sc.Text(), "admin API http://"+adminAddr)
	}
	go io.Copy(io.Discard, pr)
	if !started {
		t.Fatalf("veer control did not start on %s: %v", adminAddr, <-done)
	}
	t.Chdir(t.TempDir()) // no ./veer-data here: the old fixed default would fail
	t.Setenv("VEER_TOKEN", "")
	for _, args := range [][]string{
		{"control", "whoami", "--config", cfg},
		{"control", "--config", cfg, "docs"},
	} {
		out, err := run(t, args...)
		if err != nil || !strings.Contains(out, `"role": "admin"`) && !strings.Contains(out, `"docs"`) {
			t.Fatalf("veer %v: %v\n%s", args, err, out)
		}
	}
	// The flags still win over the file.
	if _, err := run(t, "control", "whoami", "--config", cfg, "--token-file", filepath.Join(dir, "nope")); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("--token-file ignored: %v", err)
	}
	// A bad config file is named with its line.
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("data_dir: x\nadmin_listen: nowhere\n"), 0o600)
	if _, err := run(t, "control", "whoami", "--config", bad); err == nil || !strings.Contains(err.Error(), "bad.yaml:2: admin_listen") {
		t.Fatalf("bad config: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
