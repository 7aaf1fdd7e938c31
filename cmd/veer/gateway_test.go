package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/gateway"
	"github.com/veerhq/veer/obs"
)

// mainEnv makes the test binary run veer's main with the arguments in it
// (separated by spaces), so that tests can signal a real veer process.
const mainEnv = "VEER_TEST_MAIN_ARGS"

func TestMain(m *testing.M) {
	if os.Getenv(envChild) != "" { // a child process of veer up (up_test.go)
		os.Args[0] = "veer"
		main()
		os.Exit(0)
	}
	if args := os.Getenv(mainEnv); args != "" {
		os.Args = append([]string{"veer"}, strings.Fields(args)...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestGatewayCheck(t *testing.T) {
	out, err := run(t, "gateway", "--check", "../../examples/gateway.yaml")
	if err != nil || !strings.Contains(out, "ok (3 routes, 2 clusters)") {
		t.Fatalf("example: %q %v", out, err)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("clusters:\n  - name: c\n    backends: [{address: nohost}]\nroutes: [{name: r, clusters: [{name: c}]}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = run(t, "gateway", "--check", bad)
	if err == nil || !strings.Contains(err.Error(), bad+":3: clusters[0].backends[0].address") {
		t.Fatalf("bad config: %v, want file:line: field", err)
	}
	// issue 27: a YAML syntax error and a type error read file:line: too
	for src, want := range map[string]string{
		"listen: [a b\n": bad + ":1: did not find expected ','",
		"routes:\n  - name: r\n    timeout: 2 seconds\n": bad + `:3: routes[0].timeout: want a duration such as "2s" or "500ms", got "2 seconds"`,
	} {
		if err := os.WriteFile(bad, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err = run(t, "gateway", "--check", bad); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", src, err, want)
		}
	}
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// veerProcess runs "veer gateway --config path" as a child process and
// hands its log lines to lines.
func veerProcess(t *testing.T, path string) (*exec.Cmd, <-chan string) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), mainEnv+"=gateway --config "+path)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	lines := make(chan string, 1000)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	return cmd, lines
}

// waitLog reads log lines until one contains want.
func waitLog(t *testing.T, lines <-chan string, want string) string {
	t.Helper()
	timeout := time.After(10 * time.Second)
	var seen []string
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("process ended before logging %q; its last lines:\n%s", want, strings.Join(seen[max(0, len(seen)-10):], "\n"))
			}
			seen = append(seen, l)
			if strings.Contains(l, want) {
				return l
			}
		case <-timeout:
			t.Fatalf("no log line with %q in 10s", want)
		}
	}
}

// TestGatewayProcess runs a real veer gateway process: it serves, keeps its
// config when the file turns invalid (SIGHUP), applies a valid edit, and on
// SIGTERM under load drains and exits 0 while a client that retries
// idempotent requests on a second gateway sees no failure.
func TestGatewayProcess(t *testing.T) {
	a := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "a") }))
	defer a.Close()
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "b") }))
	defer b.Close()
	plain, admin := freeAddr(t), freeAddr(t)
	path := filepath.Join(t.TempDir(), "gw.yaml")
	write := func(cluster string, extra string) {
		y := "listen: {addr: 'off', plain: '" + plain + "', shutdown_timeout: 5s}\nadmin: {addr: '" + admin + "'}\n" +
			"routes: [{name: r, clusters: [{name: " + cluster + "}]}]\n" +
			"clusters: [{name: a, backends: [{address: '" + a.Listener.Addr().String() + "'}]}, {name: b, backends: [{address: '" + b.Listener.Addr().String() + "'}]}]\n" + extra
		if err := os.WriteFile(path+".tmp", []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	write("a", "")
	cmd, lines := veerProcess(t, path)
	waitLog(t, lines, "gateway listening")
	base := "http://" + plain
	cl := &http.Client{Timeout: 5 * time.Second}
	body := func() string {
		resp, err := cl.Get(base + "/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if got := body(); got != "a" {
		t.Fatalf("first answer %q", got)
	}
	write("a", "bogus_field: 1\n")
	_ = cmd.Process.Signal(syscall.SIGHUP)
	if l := waitLog(t, lines, "keeping the previous config"); !strings.Contains(l, "bogus_field") {
		t.Errorf("rejection log lacks the field: %s", l)
	}
	if got := body(); got != "a" {
		t.Fatalf("after an invalid file: %q, want the old config's answer", got)
	}
	write("b", "")
	_ = cmd.Process.Signal(syscall.SIGHUP)
	waitLog(t, lines, "config applied")
	if got := body(); got != "b" {
		t.Fatalf("after a valid edit: %q", got)
	}

	// a second gateway, in this process, for the client to retry on
	var cfg gateway.Config
	if err := config.Parse([]byte("listen: {addr: 'off', plain: '127.0.0.1:0'}\nroutes: [{name: r, clusters: [{name: b}]}]\nclusters: [{name: b, backends: [{address: '"+b.Listener.Addr().String()+"'}]}]\n"), "second", &cfg); err != nil {
		t.Fatal(err)
	}
	g2, err := gateway.New(cfg, gateway.Options{Logger: obs.Discard, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if err := g2.Start(); err != nil {
		t.Fatal(err)
	}
	defer g2.Close()
	second := "http://" + g2.Addrs().Plain

	var reqs, fails, onSecond atomic.Int64
	stop := make(chan struct{})
	loaded := make(chan struct{}) // closed at the 200th request
	var loadedOnce sync.Once
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Timeout: 5 * time.Second}
			for {
				select {
				case <-stop:
					return
				default:
				}
				if reqs.Add(1) == 200 {
					loadedOnce.Do(func() { close(loaded) })
				}
				ok := func(u string) bool {
					resp, err := c.Get(u)
					if err != nil {
						return false
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
					return resp.StatusCode == 200
				}
				if !ok(base + "/") { // the client's retry: the other gateway
					onSecond.Add(1)
					if !ok(second + "/") {
						fails.Add(1)
					}
				}
			}
		}()
	}
	<-loaded // some load before the signal
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitLog(t, lines, "stopped")
	err = cmd.Wait()
	close(stop)
	wg.Wait()
	if err != nil {
		t.Errorf("veer gateway exited with %v after SIGTERM, want 0", err)
	}
	t.Logf("requests %d, retried on the second gateway %d, failed %d", reqs.Load(), onSecond.Load(), fails.Load())
	if fails.Load() != 0 {
		t.Errorf("%d requests failed", fails.Load())
	}
	if onSecond.Load() == 0 {
		t.Errorf("no request went to the second gateway: the first never stopped?")
	}
}
