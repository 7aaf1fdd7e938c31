package main

import (
	"bytes"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
)

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestHelpListsSubcommands(t *testing.T) {
	out, err := run(t, "--help")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"version"}
	for _, c := range newRoot().Commands() {
		want = append(want, c.Name())
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("--help does not list %q:\n%s", w, out)
		}
	}
}

func TestVersion(t *testing.T) {
	out, err := run(t, "version")
	if err != nil || !strings.Contains(out, runtime.Version()) || !strings.Contains(out, "commit") {
		t.Fatalf("version: %q, %v", out, err)
	}
	out, err = run(t, "version", "--json")
	var v struct{ Version, Commit, Go string }
	if err != nil || json.Unmarshal([]byte(out), &v) != nil || v.Go != runtime.Version() || v.Version == "" {
		t.Fatalf("version --json: %q, %v", out, err)
	}
	if _, err := run(t, "version", "extra"); err == nil {
		t.Fatal("version accepted an argument")
	}
	if _, err := run(t, "no-such-command"); err == nil {
		t.Fatal("unknown subcommand accepted")
	}
}
