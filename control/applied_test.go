package control_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/veerhq/veer/control"
)

// TestWaitAppliedIsReadYourWrites: once WaitApplied returns for the
// revision an admin write answered, the routing answer reflects that write
// (before it, a route asked at once could meet "no routing table yet");
// a revision not yet written waits until ctx ends, naming both revisions.
func TestWaitAppliedIsReadYourWrites(t *testing.T) {
	e := start(t, control.Config{}, control.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rev := e.put(control.KeyTable, table())
	if err := e.svc.WaitApplied(ctx, rev); err != nil {
		t.Fatal(err)
	}
	if got := e.svc.Applied(); got < rev {
		t.Fatalf("Applied() = %d after WaitApplied(%d)", got, rev)
	}
	if e.svc.Snapshot() == nil {
		t.Fatal("no snapshot after WaitApplied of the table's revision")
	}
	for i := range 20 { // each write is seen at once by what follows it
		tb := table()
		tb.Sites[0].Clusters = tb.Sites[0].Clusters[:1]
		tb.Sites[0].Clusters[0].Domain = fmt.Sprintf("a1-%d.example.com", i)
		rev = e.put(control.KeyTable, tb)
		if err := e.svc.WaitApplied(ctx, rev); err != nil {
			t.Fatal(err)
		}
		a := e.svc.Snapshot().Decide(netip.MustParseAddr("127.0.0.1"), "d", "")
		if a.Primary != tb.Sites[0].Clusters[0].Domain {
			t.Fatalf("revision %d applied: primary %s, want %s", rev, a.Primary, tb.Sites[0].Clusters[0].Domain)
		}
	}
	short, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	err := e.svc.WaitApplied(short, rev+100)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitApplied of a future revision: %v, want the deadline", err)
	}
	t.Log(err)
}
