package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDNSCheckAnnounceStore: announce_store is validated like
// control_store, naming the file, line and field.
func TestDNSCheckAnnounceStore(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte("listen: 127.0.0.1:0\nannounce_store:\n  endpoints: [http://127.0.0.1:2379]\n"), 0o644)
	if out, err := run(t, "dns", "--check", good); err != nil || !strings.Contains(out, "OK") {
		t.Fatalf("check: %q %v", out, err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("listen: 127.0.0.1:0\nannounce_store:\n  endpoints: [127.0.0.1:2379]\n"), 0o644)
	if _, err := run(t, "dns", "--check", bad); err == nil || !strings.Contains(err.Error(), "bad.yaml:3: announce_store.endpoints[0]:") {
		t.Fatalf("check bad: %v, want file:line: field", err)
	}
}
