package limitredis

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/veerhq/veer/internal/redistest"
	"github.com/veerhq/veer/limit"
)

// TestApply: new limits take effect on the next decision, through Redis
// and in the fallback; fields that cannot change at run time are refused
// by name and change nothing.
func TestApply(t *testing.T) {
	srv := redistest.Start(t)
	cfg := Config{Timeout: 2 * time.Second, Limits: limit.Config{Dimensions: []limit.Dimension{
		{Name: "tenant", Default: limit.Limits{Rate: 0.001, Burst: 1}},
	}}}
	l, _ := newLimiter(t, cfg, srv.Addr(), Options{})
	ctx := context.Background()
	admit := func(key string) bool {
		r := l.Admit(ctx, []string{key})
		r.Permit.Release()
		return r.Allowed
	}
	if !admit("a") || admit("a") {
		t.Fatal("burst 1 not enforced")
	}
	bad := cfg
	bad.Prefix, bad.LeaseTTL = "other:", time.Minute
	bad.Limits.Dimensions = []limit.Dimension{{Name: "tenant", Default: limit.Limits{Rate: 0.001, Burst: 5}}}
	err := l.Apply(bad)
	if err == nil || !strings.Contains(err.Error(), "prefix") || !strings.Contains(err.Error(), "lease_ttl") {
		t.Fatalf("Apply with a new prefix and lease_ttl: %v, want an error naming both", err)
	}
	first, second := admit("b"), admit("b")
	if !first || second {
		t.Fatal("a refused Apply changed the limits")
	}
	invalid := cfg
	invalid.Limits.Dimensions = []limit.Dimension{{Name: ""}}
	if err := l.Apply(invalid); err == nil || !strings.Contains(err.Error(), "limits.dimensions[0].name") {
		t.Fatalf("invalid Apply: %v, want an error naming limits.dimensions[0].name", err)
	}
	good := cfg
	good.Instances = 2
	good.Limits.Dimensions = []limit.Dimension{{Name: "tenant", Default: limit.Limits{Rate: 0.001, Burst: 3}}}
	if err := l.Apply(good); err != nil {
		t.Fatal(err)
	}
	// Key a keeps its state (one of 3 spent); a fresh key gets all 3.
	got := 0
	for range 5 {
		if admit("a") {
			got++
		}
	}
	if got != 2 {
		t.Fatalf("key a after burst 1 → 3: %d more admitted, want 2", got)
	}
	if l.InFallback() {
		t.Fatal("decided locally")
	}
	// The fallback follows: 3 ÷ 2 instances = 1 for a fresh key.
	srv.Kill()
	local := 0
	for range 3 {
		if admit("c") {
			local++
		}
	}
	if !l.InFallback() || local != 1 {
		t.Fatalf("with Redis dead: fallback %v, admitted %d, want 1 (burst 3 ÷ 2 instances)", l.InFallback(), local)
	}
}
