package storeetcd_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/veerhq/veer/store"
	"github.com/veerhq/veer/store/storeetcd"
	"github.com/veerhq/veer/store/storeetcd/etcdtest"
	"github.com/veerhq/veer/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// grpc's and etcd client's background goroutines linger briefly after Close.
		goleak.IgnoreTopFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
		goleak.IgnoreTopFunction("google.golang.org/grpc/internal/transport.(*controlBuffer).get"),
	)
}

func TestEtcdContract(t *testing.T) {
	srv := etcdtest.New(t)
	n := 0
	storetest.Run(t, func(t *testing.T) store.Store {
		n++ // each subtest gets its own prefix: a fresh, empty store
		s, err := storeetcd.New(storeetcd.Config{Endpoints: []string{srv.URL}, Prefix: fmt.Sprintf("/t%d/", n)}, storeetcd.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestEtcdCompactedWatchResets(t *testing.T) {
	srv := etcdtest.New(t)
	s, err := storeetcd.New(storeetcd.Config{Endpoints: []string{srv.URL}}, storeetcd.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var last store.Doc
	for i := range 5 {
		if last, err = s.Put(ctx, "k", []byte(fmt.Sprint(i)), store.Write{}); err != nil {
			t.Fatal(err)
		}
	}
	cli, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Compact(ctx, last.Revision); err != nil {
		t.Fatal(err)
	}
	e := <-s.Watch(ctx, "", 1)
	if e.Type != store.Reset || !errors.Is(e.Err, store.ErrCompacted) {
		t.Fatalf("watch from a compacted revision: %+v, want Reset ErrCompacted", e)
	}
}

func TestEtcdDownWritesUnavailableWatchResumes(t *testing.T) {
	srv := etcdtest.New(t)
	s, err := storeetcd.New(storeetcd.Config{Endpoints: []string{srv.URL}, RequestTimeout: 300 * time.Millisecond}, storeetcd.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := s.Put(ctx, "k", []byte("before"), store.Write{})
	if err != nil {
		t.Fatal(err)
	}
	w := s.Watch(ctx, "", d.Revision+1)
	srv.Kill()
	if _, err := s.Put(ctx, "k", []byte("down"), store.Write{}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Put with etcd down: %v, want ErrUnavailable", err)
	}
	if _, err := s.Get(ctx, "k"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Get with etcd down: %v, want ErrUnavailable", err)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "k", []byte("after"), store.Write{Expect: 1}); err != nil {
		t.Fatalf("Put after restart: %v", err)
	}
	select {
	case e := <-w:
		if e.Type != store.Put || string(e.Doc.Value) != "after" || e.Doc.Version != 2 {
			t.Fatalf("resumed watch: %+v", e)
		}
	case <-ctx.Done():
		t.Fatal("watch did not resume after etcd came back")
	}
}

func TestConfigValidateNamesField(t *testing.T) {
	for cfg, want := range map[string]storeetcd.Config{
		"endpoints":    {},
		"endpoints[0]": {Endpoints: []string{"127.0.0.1:2379"}},
	} {
		err := want.Validate()
		if err == nil || !containsField(err, cfg) {
			t.Errorf("Validate(%+v) = %v, want field %s", want, err, cfg)
		}
	}
}

func containsField(err error, f string) bool {
	return len(err.Error()) >= len(f) && err.Error()[:len(f)] == f
}
