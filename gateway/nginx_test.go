package gateway

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/veerhq/veer/gateway/internal/h1"
)

// startNginx runs nginx (scripts/test-deps.sh installs it) on a random
// loopback port in a temp dir as an upstream: fixed answers, a static file
// (ETag, 304), gzip (chunked answers) and at most 3 requests per
// connection (then Connection: close). It returns host:port.
func startNginx(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		t.Fatal("nginx not found: run scripts/test-deps.sh (Debian package nginx)")
	}
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} { // nginx's worker (nobody, when run as root) reads the files
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "www", "static"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "www", "static", "f.txt"), []byte(strings.Repeat("static file\n", 200)), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	conf := fmt.Sprintf(`worker_processes 1;
daemon off;
pid %[1]s/nginx.pid;
error_log stderr notice;
events { worker_connections 64; }
http {
  access_log off;
  client_body_temp_path %[1]s/body; proxy_temp_path %[1]s/proxy; fastcgi_temp_path %[1]s/fcgi;
  uwsgi_temp_path %[1]s/uwsgi; scgi_temp_path %[1]s/scgi;
  keepalive_requests 3;
  gzip on; gzip_types text/plain; gzip_min_length 0; gzip_proxied any;
  default_type text/plain;
  server {
    listen %[2]s;
    root %[1]s/www;
    location = /ret { return 200 "nginx $request_method $content_length\n"; }
    location = /empty { return 204; }
  }
}
`, dir, addr)
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", path, "-e", "stderr")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	ready := make(chan struct{})
	var log strings.Builder
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stderr)
		started := false
		for sc.Scan() {
			if !started {
				log.WriteString(sc.Text() + "\n")
			}
			if !started && strings.Contains(sc.Text(), "start worker process") {
				started = true
				close(ready) // the master has bound the port before it starts workers
			}
		}
	}()
	select {
	case <-ready:
	case <-exited:
		t.Fatalf("nginx exited before it was ready:\n%s", log.String())
	case <-time.After(20 * time.Second):
		t.Fatalf("nginx not ready after 20s")
	}
	return addr
}

// The gateway's own HTTP/1.1 client against nginx: fixed answers, bodies
// sent with their length, HEAD, 204, 304, gzip-chunked answers, and nginx
// closing every third connection's keep-alive (Connection: close), over
// more requests than one connection carries.
func TestH1ClientAgainstNginx(t *testing.T) {
	ng := startNginx(t)
	g, base := startGateway(t, fill(`
routes: [{name: r, clusters: [{name: c}]}]
clusters: [{name: c, backends: [{address: NG}]}]
`, "NG", ng))
	if _, ok := g.snap.Load().clusters["c"].transport.(*h1.Client); !ok {
		t.Fatal("the cluster does not use the gateway's HTTP/1.1 client")
	}
	tr := &http.Transport{DisableCompression: true}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr}
	first, _ := get(t, cl, base+"/static/f.txt")
	etag := first.Header.Get("Etag")
	if etag == "" {
		t.Fatalf("nginx sent no ETag: %v", first.Header)
	}
	for i := range 4 {
		for _, tc := range []struct {
			name, method, path, body string
			hdr                      []string
			status                   int
			want                     string
			gzip                     bool
		}{
			{name: "GET fixed", method: "GET", path: "/ret", status: 200, want: "nginx GET \n"},
			{name: "POST with body", method: "POST", path: "/ret", body: "hello", status: 200, want: "nginx POST 5\n"},
			{name: "HEAD", method: "HEAD", path: "/static/f.txt", status: 200, want: ""},
			{name: "204", method: "GET", path: "/empty", status: 204, want: ""},
			{name: "static", method: "GET", path: "/static/f.txt", status: 200, want: strings.Repeat("static file\n", 200)},
			{name: "304", method: "GET", path: "/static/f.txt", hdr: []string{"If-None-Match", etag}, status: 304, want: ""},
			{name: "gzip, chunked", method: "GET", path: "/static/f.txt", hdr: []string{"Accept-Encoding", "gzip"}, status: 200, want: strings.Repeat("static file\n", 200), gzip: true},
			{name: "404", method: "GET", path: "/nope", status: 404},
		} {
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			req, _ := http.NewRequest(tc.method, base+tc.path, body)
			for j := 0; j+1 < len(tc.hdr); j += 2 {
				req.Header.Set(tc.hdr[j], tc.hdr[j+1])
			}
			resp, err := cl.Do(req)
			if err != nil {
				t.Fatalf("round %d %s: %v", i, tc.name, err)
			}
			var r io.Reader = resp.Body
			if tc.gzip {
				if resp.Header.Get("Content-Encoding") != "gzip" {
					t.Fatalf("round %d %s: not gzip: %v", i, tc.name, resp.Header)
				}
				zr, err := gzip.NewReader(resp.Body)
				if err != nil {
					t.Fatalf("round %d %s: %v", i, tc.name, err)
				}
				r = zr
			}
			b, err := io.ReadAll(r)
			resp.Body.Close()
			if err != nil {
				t.Fatalf("round %d %s: body: %v", i, tc.name, err)
			}
			if resp.StatusCode != tc.status || (tc.status != 404 && string(b) != tc.want) {
				t.Fatalf("round %d %s: %d %q, want %d %q", i, tc.name, resp.StatusCode, b, tc.status, tc.want)
			}
		}
	}
}
