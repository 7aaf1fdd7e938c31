package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/veerhq/veer/store"
	"github.com/veerhq/veer/store/storeetcd"
	"github.com/veerhq/veer/store/storeetcd/etcdtest"
)

// TestGatewayProcessFollowsControlStore runs a real veer gateway process
// with a control_store section: a limits document written to etcd while it
// runs turns its file's generous limit into the document's (429 after the
// burst), without a restart.
func TestGatewayProcessFollowsControlStore(t *testing.T) {
	etcd := etcdtest.New(t)
	be := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer be.Close()
	plain := freeAddr(t)
	path := filepath.Join(t.TempDir(), "gw.yaml")
	y := "listen: {addr: 'off', plain: '" + plain + "', shutdown_timeout: 5s}\n" +
		"routes: [{name: r, clusters: [{name: a}]}]\n" +
		"clusters: [{name: a, backends: [{address: '" + be.Listener.Addr().String() + "'}]}]\n" +
		"limits: {keys: ['header:X-Tenant'], dimensions: [{name: tenant, default: {rate: 1000, burst: 1000}}]}\n" +
		"control_store: {endpoints: ['" + etcd.URL + "']}\n"
	if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd, lines := veerProcess(t, path)
	waitLog(t, lines, "gateway listening")
	waitLog(t, lines, "following the control store")
	cl := &http.Client{Timeout: 5 * time.Second}
	status := func(tenant string) int {
		req, _ := http.NewRequest(http.MethodGet, "http://"+plain+"/", nil)
		req.Header.Set("X-Tenant", tenant)
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	for range 3 {
		if c := status("a"); c != 200 {
			t.Fatalf("file limits: status %d", c)
		}
	}
	st, err := storeetcd.New(storeetcd.Config{Endpoints: []string{etcd.URL}}, storeetcd.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Put(context.Background(), store.KeyGatewayLimits, []byte("dimensions: [{name: tenant, default: {rate: 0.001, burst: 1}}]\n"), store.Write{Author: "test"}); err != nil {
		t.Fatal(err)
	}
	waitLog(t, lines, "store document applied")
	if a, b := status("b"), status("b"); a != 200 || b != 429 {
		t.Fatalf("store limits (burst 1): statuses %d, %d, want 200, 429", a, b)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	waitLog(t, lines, "stopped")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v", err)
	}
}
