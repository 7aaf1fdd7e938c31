package gateway

import (
	"bufio"
	_ "embed"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Contender is one proxy under test.
type Contender struct {
	Name string
	// Protos it serves: "h1" always (plain), "h2" and "h3" over TLS.
	Protos []string
	// Start launches it on core 1 in dir, proxying to backend (host:port);
	// plain and tls are the ports to listen on.
	Start func(dir, backend string, plain, tlsPort int) (*exec.Cmd, error)
}

// guardsYAML is the "veer guards" contender's configuration beyond the bare
// one (guards.yaml, shared with scripts/gateway-cpu-ab.sh and the gateway
// package's BenchmarkServe).
//
//go:embed guards.yaml
var guardsYAML string

// pinned returns a command pinned to core 1 with GOMAXPROCS=1.
func pinned(name string, args ...string) *exec.Cmd {
	cmd := exec.Command("taskset", append([]string{"-c", "1", name}, args...)...)
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	cmd.Stdout, cmd.Stderr = nil, nil
	return cmd
}

// Contenders returns the contenders; veer is the path of the veer binary,
// self the path of gatewaybench (which also serves the ReverseProxy role).
func Contenders(veer, self string) []Contender {
	veerCfg := func(guards bool) func(dir, backend string, plain, tlsPort int) (*exec.Cmd, error) {
		return func(dir, backend string, plain, tlsPort int) (*exec.Cmd, error) {
			tlsAddr := fmt.Sprintf("'127.0.0.1:%d'", tlsPort)
			if os.Getenv("GATEWAYBENCH_VEER_NO_TLS") != "" {
				tlsAddr = "'off'"
			}
			if os.Getenv("GATEWAYBENCH_VEER_NO_H3") != "" {
				tlsAddr += ", disable_http3: true"
			}
			y := fmt.Sprintf(`listen: {addr: %s, plain: '127.0.0.1:%d'}
data_dir: %s
routes: [{name: r, clusters: [{name: c}]}]
clusters: [{name: c, max_idle_per_backend: 256, backends: [{address: '%s'}]}]
`, tlsAddr, plain, dir, backend)
			if guards {
				y += guardsYAML
			} else {
				y += "retry: {disabled: true}\n"
			}
			path := filepath.Join(dir, "veer.yaml")
			if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
				return nil, err
			}
			return pinned(veer, "gateway", "--config", path, "--log-format", "text"), nil
		}
	}
	bareProtos := []string{"h1", "h2", "h3"}
	switch {
	case os.Getenv("GATEWAYBENCH_VEER_NO_TLS") != "":
		bareProtos = bareProtos[:1] // no TLS listener: neither h2 nor h3
	case os.Getenv("GATEWAYBENCH_VEER_NO_H3") != "":
		bareProtos = bareProtos[:2]
	}
	return []Contender{
		{Name: "veer bare", Protos: bareProtos, Start: veerCfg(false)},
		{Name: "veer guards", Protos: []string{"h1"}, Start: veerCfg(true)},
		{Name: "go-reverseproxy", Protos: []string{"h1"}, Start: func(dir, backend string, plain, _ int) (*exec.Cmd, error) {
			return pinned(self, "-role", "reverseproxy", "-listen", fmt.Sprintf("127.0.0.1:%d", plain), "-backend", backend), nil
		}},
		{Name: "haproxy", Protos: []string{"h1"}, Start: func(dir, backend string, plain, _ int) (*exec.Cmd, error) {
			c := fmt.Sprintf(`global
  nbthread 1
  maxconn 9000
defaults
  mode http
  timeout connect 2s
  timeout client 60s
  timeout server 60s
  option http-keep-alive
frontend f
  bind 127.0.0.1:%d
  default_backend b
backend b
  http-reuse always
  server s1 %s maxconn 1000
`, plain, backend)
			path := filepath.Join(dir, "haproxy.cfg")
			if err := os.WriteFile(path, []byte(c), 0o644); err != nil {
				return nil, err
			}
			return pinned("haproxy", "-db", "-f", path), nil
		}},
		{Name: "nginx", Protos: []string{"h1"}, Start: func(dir, backend string, plain, _ int) (*exec.Cmd, error) {
			c := fmt.Sprintf(`worker_processes 1;
daemon off;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
worker_rlimit_nofile 40000;
events { worker_connections 20000; }
http {
  access_log off;
  client_body_temp_path %[1]s;
  proxy_temp_path %[1]s;
  upstream b { server %[2]s; keepalive 256; }
  server {
    listen 127.0.0.1:%[3]d;
    location / { proxy_pass http://b; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
`, dir, backend, plain)
			path := filepath.Join(dir, "nginx.conf")
			if err := os.WriteFile(path, []byte(c), 0o644); err != nil {
				return nil, err
			}
			return pinned("nginx", "-p", dir, "-c", path), nil
		}},
		{Name: "caddy", Protos: []string{"h1", "h2", "h3"}, Start: func(dir, backend string, plain, tlsPort int) (*exec.Cmd, error) {
			c := fmt.Sprintf(`{
  admin off
  auto_https disable_redirects
  skip_install_trust
  default_sni 127.0.0.1
  storage file_system %[1]s/caddy
  http_port %[2]d
  https_port %[3]d
}
http://127.0.0.1:%[2]d {
  reverse_proxy %[4]s
}
https://127.0.0.1:%[3]d {
  tls internal
  reverse_proxy %[4]s
}
`, dir, plain, tlsPort, backend)
			path := filepath.Join(dir, "Caddyfile")
			if err := os.WriteFile(path, []byte(c), 0o644); err != nil {
				return nil, err
			}
			cmd := pinned("caddy", "run", "--config", path, "--adapter", "caddyfile")
			cmd.Env = append(cmd.Env, "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)
			return cmd, nil
		}},
	}
}

// WaitReady waits until url answers 200 through cl, up to 10 s.
func WaitReady(check func() error) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond) // polling a starting process
	}
}

// FreePort returns a free loopback TCP port (also free on UDP, for HTTP/3).
func FreePort() int {
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			panic(err)
		}
		p := ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
		pc, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", p))
		if err == nil {
			_ = pc.Close()
			return p
		}
	}
}

// Tail returns the last lines of a file, for error messages.
func Tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}
