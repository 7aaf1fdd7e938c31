package failover

import (
	"context"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
)

// TestRewrite: the request's port and path are kept, the Host header
// follows the domain, opted-out requests and other hosts pass through.
func TestRewrite(t *testing.T) {
	l := newLab(t, "primary.test", "dc1.test", "other.test")
	r := newRig(t, l, filepath.Join(t.TempDir(), "f.json"), func(c *Config) { c.Backups = []string{"dc1.test"} })
	// restore BACKUP on dc1 through the store
	r.tr.Close()
	if err := FileStore(r.path).Save("dc1.test"); err != nil {
		t.Fatal(err)
	}
	r = newRig(t, l, r.path, func(c *Config) { c.Backups = []string{"dc1.test"} })
	r.wantState(t, Backup, "dc1.test")

	mustGet(t, r.c, "http://primary.test:8080/x?q=1", "dc1.test")
	mustGet(t, r.c, "http://PRIMARY.test/y", "dc1.test")
	req, _ := http.NewRequestWithContext(WithoutFailover(context.Background()), "GET", "http://primary.test/z", nil)
	resp, err := r.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	mustGet(t, r.c, "http://other.test/w", "other.test")

	if got, want := l.server("dc1.test").seen(), []seen{
		{host: "dc1.test:8080", path: "/x", proto: 1},
		{host: "dc1.test", path: "/y", proto: 1},
	}; !slices.Equal(got, want) {
		t.Fatalf("dc1 saw %+v, want %+v", got, want)
	}
	if got, want := l.server("primary.test").seen(), []seen{{host: "primary.test", path: "/z", proto: 1}}; !slices.Equal(got, want) {
		t.Fatalf("primary saw %+v, want %+v", got, want)
	}
	if got, want := l.server("other.test").seen(), []seen{{host: "other.test", path: "/w", proto: 1}}; !slices.Equal(got, want) {
		t.Fatalf("other saw %+v, want %+v", got, want)
	}
	// the canary takes the scheme and port of the last regular request
	// (http, no port)
	r.clk.Advance(DefaultRecoveryTimeout)
	r.ev.want(t, Primary, Backup, ReasonRestored, "dc1.test")
	r.ev.want(t, Backup, Recovery, ReasonRecoveryTimer, "dc1.test")
	r.ev.want(t, Recovery, Primary, ReasonRecoverySuccess, "primary.test")
	if got, want := l.server("primary.test").canaries(), []seen{{host: "primary.test", path: DefaultCanaryPath, canary: "1", proto: 1}}; !slices.Equal(got, want) {
		t.Fatalf("primary saw canaries %+v, want %+v", got, want)
	}
}
