package test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/gateway"
	"github.com/veerhq/veer/gateway/gatewaytest"
)

// This file holds the plumbing of gateway_interop_test.go: the tools we did
// not write (nginx, HAProxy, h2load, hey, curl), found on PATH or failing the
// test with the Debian package that scripts/test-deps.sh installs, and
// started on loopback listeners that the test binds itself and hands over
// as an inherited file descriptor, so a tool is reachable the moment it is
// started: nothing polls for a port to open.

// tool returns the path of command name or fails the test naming the
// Debian package that provides it.
func tool(t testing.TB, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found (%v): run `make deps` (scripts/test-deps.sh, Debian package %s)", name, err, pkg)
	}
	return p
}

// run runs a tool to completion with a deadline and returns its combined
// output; a non-zero exit fails the test with that output.
func run(t testing.TB, timeout time.Duration, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// listen binds a loopback TCP listener on a random port and returns its
// address and its file (for a child process to inherit).
func listen(t testing.TB) (string, *os.File) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // f is a dup: the socket keeps listening
	t.Cleanup(func() { _ = f.Close() })
	return addr, f
}

// daemon is a server process we did not write, stopped with its process
// group (SIGKILL) when the test ends; its output is kept for failure
// messages.
type daemon struct {
	name string
	cmd  *exec.Cmd
	out  *lockedBuffer
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startDaemon starts bin with args; files are inherited as fd 3, 4, ...
func startDaemon(t testing.TB, name, bin string, env []string, files []*os.File, args ...string) *daemon {
	t.Helper()
	d := &daemon{name: name, out: &lockedBuffer{}}
	d.cmd = exec.Command(bin, args...)
	d.cmd.Env = append(os.Environ(), env...)
	d.cmd.ExtraFiles = files
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its workers go with it
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
		_ = d.cmd.Wait()
		if t.Failed() {
			t.Logf("%s output:\n%s", name, d.out.String())
		}
	})
	return d
}

// nginx is a running nginx (a master and one worker; nginx 1.22 in
// single-process mode does not accept on inherited sockets) serving the
// server blocks given, each listening on an inherited socket.
type nginx struct {
	*daemon
	dir string
}

// startNginx runs nginx with servers (server { ... } blocks; the string
// %LISTEN<i>% is replaced by the i-th listener's address). It returns once
// nginx has parsed its config: the listeners were bound before it started.
func startNginx(t testing.TB, servers string, listeners ...string) *nginx {
	t.Helper()
	bin := tool(t, "nginx", "nginx")
	dir := t.TempDir()
	var files []*os.File
	var fds []string
	for i := range listeners {
		addr, f := listen(t)
		files = append(files, f)
		fds = append(fds, fmt.Sprint(3+i))
		servers = strings.ReplaceAll(servers, fmt.Sprintf("%%LISTEN%d%%", i), addr)
		listeners[i] = addr
	}
	user := "" // as root, the worker would switch to nobody and not read the temp dir
	if os.Geteuid() == 0 {
		user = "user root;\n"
	}
	conf := `daemon off;
worker_processes 1;
` + user + `pid ` + dir + `/nginx.pid;
error_log ` + dir + `/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path ` + dir + `/body;
  proxy_temp_path ` + dir + `/proxy;
  fastcgi_temp_path ` + dir + `/fastcgi;
  uwsgi_temp_path ` + dir + `/uwsgi;
  scgi_temp_path ` + dir + `/scgi;
  default_type application/octet-stream;
` + servers + `
}
`
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, 10*time.Second, bin, "-t", "-q", "-p", dir, "-e", dir+"/error.log", "-c", path)
	// NGINX=fd;fd; hands nginx listening sockets (its binary-upgrade path):
	// a listen directive with the same address takes the inherited socket.
	d := startDaemon(t, "nginx", bin, []string{"NGINX=" + strings.Join(fds, ";") + ";"}, files,
		"-p", dir, "-e", dir+"/error.log", "-c", path)
	return &nginx{daemon: d, dir: dir}
}

// haproxy runs HAProxy with cfg (the string %FD<i>% is replaced by the i-th
// inherited listener, to put after `bind`). addrs receives the addresses.
func startHAProxy(t testing.TB, cfg string, addrs []string) *daemon {
	t.Helper()
	bin := tool(t, "haproxy", "haproxy")
	dir := t.TempDir()
	var files []*os.File
	for i := range addrs {
		addr, f := listen(t)
		files = append(files, f)
		addrs[i] = addr
		cfg = strings.ReplaceAll(cfg, fmt.Sprintf("%%FD%d%%", i), fmt.Sprintf("fd@%d", 3+i))
	}
	path := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return startDaemon(t, "haproxy", bin, nil, files, "-db", "-f", path)
}

// interopGateway starts an in-process gateway from yaml with a TLS listener
// (self-signed certificate in a temp dir, no HTTP/3) and a plain one, both
// on random loopback ports.
func interopGateway(t testing.TB, yaml string) *gateway.Gateway {
	t.Helper()
	var cfg gateway.Config
	if err := config.Parse([]byte(yaml), "interop.yaml", &cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Listen.Addr = "127.0.0.1:0"
	cfg.Listen.Plain = "127.0.0.1:0"
	cfg.DataDir = t.TempDir()
	return gatewaytest.Start(t, cfg, gateway.Options{})
}

// randomFile writes n pseudo-random bytes (a fixed seed) to dir/name and
// returns their SHA-256.
func randomFile(t testing.TB, dir, name string, n int) string {
	t.Helper()
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{byte(n), byte(n >> 8), byte(n >> 16)})
	_, _ = r.Read(b)
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return sha(b)
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// hashBackend answers every request with the SHA-256 and length of the body
// it read, the framing it saw (chunked or a length) and the request line, so
// that a test learns what arrived after the hops in front of it. A request
// with X-Want-Sha256 whose body does not match gets 400, so that a load
// tool which only counts statuses sees a corrupted body. With ?stream=N it
// streams N lines instead (streamLines).
func hashBackend(t testing.TB) string {
	t.Helper()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if lines, _ := strconv.Atoi(r.URL.Query().Get("stream")); lines > 0 {
			streamLines(w, lines)
			return
		}
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if want := r.Header.Get("X-Want-Sha256"); want != "" && want != hex.EncodeToString(h.Sum(nil)) {
			http.Error(w, fmt.Sprintf("body of %d bytes does not match X-Want-Sha256", n), http.StatusBadRequest)
			return
		}
		w.Header().Set("X-Body-Sha256", hex.EncodeToString(h.Sum(nil)))
		w.Header().Set("X-Body-Len", fmt.Sprint(n))
		w.Header().Set("X-Framing", fmt.Sprintf("te=%v cl=%d", r.TransferEncoding, r.ContentLength))
		w.Header().Set("X-Proto", r.Proto)
		w.Header().Set("X-Seen-Xff", r.Header.Get("X-Forwarded-For"))
		w.Header().Set("X-Seen-Via", strings.Join(r.Header.Values("Via"), ", "))
		w.Header().Set("X-Seen-Upgrade", r.Header.Get("Upgrade"))
		_, _ = fmt.Fprintf(w, "%s %s %d\n", r.Method, r.URL.RequestURI(), n)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// established counts the TCP connections in state ESTABLISHED whose local
// end is the IPv4 addr (a server's side), from /proc/net/tcp: the kernel's
// view, exact at once, where a server's own count lags its event loop.
func established(t testing.TB, addr string) int {
	t.Helper()
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	ip := ap.Addr().As4()
	local := fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], ap.Port())
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 3 && f[1] == local && f[3] == "01" {
			n++
		}
	}
	return n
}

// streamLines writes n numbered lines of 1000 bytes, flushing each: a
// response of unknown length. streamed(n) is what a client must read.
func streamLines(w http.ResponseWriter, n int) {
	rc := http.NewResponseController(w)
	for i := range n {
		_, _ = io.WriteString(w, streamLine(i))
		_ = rc.Flush()
	}
}

func streamLine(i int) string {
	return fmt.Sprintf("%06d ", i) + strings.Repeat("s", 992) + "\n"
}

func streamed(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(streamLine(i))
	}
	return b.String()
}

// debianPython is Debian's python3 (not a pyenv or venv one earlier on
// PATH), checked to import module, which Debian package pkg provides.
func debianPython(t testing.TB, module, pkg string) string {
	t.Helper()
	const py = "/usr/bin/python3"
	if out, err := exec.Command(py, "-c", "import "+module).CombinedOutput(); err != nil {
		t.Fatalf("%s cannot import %s (%v: %s): run `make deps` (scripts/test-deps.sh, Debian package %s)", py, module, err, bytes.TrimSpace(out), pkg)
	}
	return py
}
