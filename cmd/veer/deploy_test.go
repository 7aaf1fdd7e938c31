package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The systemd units in deploy/ pass `systemd-analyze verify` (the binary
// path pointed at this test binary, which verify needs to exist), and each
// ExecStart's subcommand and flags parse (the same arguments plus --help).
func TestDeployUnitsVerify(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Fatal("systemd-analyze missing: run scripts/test-deps.sh (Debian package systemd)")
	}
	units, err := filepath.Glob("../../deploy/*.service")
	if err != nil || len(units) < 3 {
		t.Fatalf("units %v, %v: want veer-control, veer-dns, veer-gateway", units, err)
	}
	dir := t.TempDir()
	var paths []string
	for _, u := range units {
		raw, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.ReplaceAll(string(raw), "/usr/local/bin/veer", os.Args[0])
		p := filepath.Join(dir, filepath.Base(u))
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
		for _, line := range strings.Split(string(raw), "\n") {
			args, ok := strings.CutPrefix(line, "ExecStart=/usr/local/bin/veer ")
			if !ok {
				continue
			}
			cmd := exec.Command(os.Args[0], append(strings.Fields(args), "--help")...)
			cmd.Env = append(os.Environ(), envChild+"=1")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s: veer %s --help: %v\n%s", filepath.Base(u), args, err, out)
			}
		}
	}
	verify := func(paths ...string) (string, error) {
		out, err := exec.Command("systemd-analyze", append([]string{"verify"}, paths...)...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	if out, err := verify(paths...); err != nil || out != "" {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	// and the check can fail: a unit with a misspelt key and a missing binary
	bad := filepath.Join(dir, "veer-bad.service")
	if err := os.WriteFile(bad, []byte("[Service]\nExecStrat=/nonexistent/veer up\nExecStart=/nonexistent/veer up\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := verify(bad); err == nil && out == "" {
		t.Fatal("systemd-analyze verify accepted a broken unit silently")
	}
}
