package guard

import (
	"context"
	"testing"
)

// TestRedisContenders starts a pinned redis-server and runs both
// distributed contenders once each against it: they decide, and the
// server's CPU time is readable.
func TestRedisContenders(t *testing.T) {
	srv, err := StartRedis("0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	rdb := Client(srv.Addr)
	defer rdb.Close()
	veer, closeVeer, err := VeerRedis(rdb, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer closeVeer()
	for name, dec := range map[string]Decider{"veer": veer, "redis_rate": RedisRate(rdb, 1, 1)} {
		first, err1 := dec(context.Background(), "k-"+name)
		second, err2 := dec(context.Background(), "k-"+name)
		if err1 != nil || err2 != nil || !first || second {
			t.Errorf("%s with limit 1/s, burst 1: %v %v then %v %v, want admitted then rejected", name, first, err1, second, err2)
		}
	}
	if _, err := srv.CPU(); err != nil {
		t.Fatal(err)
	}
	if SelfCPU() <= 0 {
		t.Fatal("no CPU time for this process")
	}
}
