package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/veerhq/veer/control"
)

// TestExampleListenersDistinct: the examples' listening addresses, the
// commented-out optional ones included (a user uncomments them), and the
// control plane's defaults never name the same address, so that the
// examples run side by side on one machine.
func TestExampleListenersDistinct(t *testing.T) {
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(files) < 2 {
		t.Fatalf("examples: %v %v", files, err)
	}
	// listen/dot_listen/doh_listen (dns), listen.addr, listen.plain and
	// admin.addr (gateway): keys at the start of a line, maybe commented.
	re := regexp.MustCompile(`(?m)^\s*#?\s*(listen|dot_listen|doh_listen|addr|plain|admin_listen):\s*"?([0-9.]+:[0-9]+|\[[0-9a-f:]+\]:[0-9]+)`)
	seen := map[string]string{
		control.DefaultListen:      "veer control's default listen",
		control.DefaultAdminListen: "veer control's default admin_listen",
	}
	n := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(raw), -1) {
			where := filepath.Base(f) + " " + m[1]
			if other, dup := seen[m[2]]; dup {
				t.Errorf("%s: %s is also %s", where, m[2], other)
			}
			seen[m[2]] = where
			n++
		}
	}
	if n < 6 {
		t.Fatalf("found %d listeners in %v: the pattern no longer matches the examples", n, files)
	}
}
