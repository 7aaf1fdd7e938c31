package test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

const haproxyFront = `
global
  maxconn 512
defaults
  mode http
  timeout connect 5s
  timeout client 30s
  timeout server 30s
  option http-keep-alive
  option forwardfor
  http-reuse always
frontend fe
  bind %FD0%
  default_backend gw
backend gw
  server gw %GATEWAY% %PROTO%
`

const nginxFront = `
upstream gw { server %GATEWAY%; keepalive 16; }
server {
  listen %LISTEN0%;
  client_max_body_size 64m;
  proxy_http_version 1.1;
  proxy_set_header Connection "";
  proxy_set_header Host $http_host;
  proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
  location / { proxy_pass http://gw; }                      # buffers the request body: Content-Length upstream
  location /stream/ {
    proxy_pass http://gw;
    proxy_request_buffering off;                            # streams it: chunked upstream when the client's was
    proxy_buffering off;
  }
  location /h10/ {
    proxy_pass http://gw;
    proxy_http_version 1.0;                                 # nginx's default: HTTP/1.0, a connection per request
    proxy_set_header Connection close;
  }
}
`

// TestGatewayInteropBehindProxies puts HAProxy, nginx, and HAProxy
// speaking HTTP/2 (h2c) in front of the gateway (a Go backend behind it hashes what arrives): keep-alive
// request series, 4 MiB uploads with a length and chunked, concurrent
// uploads of mixed sizes and pipelined requests with bodies arrive intact
// and in order through both hops, and the front proxy's connections to the
// gateway stay bounded.
func TestGatewayInteropBehindProxies(t *testing.T) {
	be := hashBackend(t)
	g := interopGateway(t, `
routes: [{name: r, clusters: [{name: c}]}]
clusters: [{name: c, backends: [{address: '`+be+`'}]}]
trusted_networks: [127.0.0.0/8]   # the front proxies: their X-Forwarded-For is kept
`)
	gw := g.Addrs().Plain
	fronts := []string{"", "", ""}
	startHAProxy(t, strings.NewReplacer("%GATEWAY%", gw, "%PROTO%", "").Replace(haproxyFront), fronts[:1])
	startNginx(t, strings.ReplaceAll(nginxFront, "%GATEWAY%", gw), fronts[1:2]...)
	// HAProxy speaking HTTP/2 (h2c, prior knowledge) to the gateway.
	startHAProxy(t, strings.NewReplacer("%GATEWAY%", gw, "%PROTO%", "proto h2").Replace(haproxyFront), fronts[2:])
	for i, name := range []string{"haproxy", "nginx", "haproxy-h2"} {
		front := fronts[i]
		t.Run(name, func(t *testing.T) {
			before := established(t, gw) // the fronts tested before keep theirs
			c := newCountingClient(false)
			defer c.CloseIdleConnections()
			base := "http://" + front
			for i := range 100 {
				resp, b := c.do(t, "GET", fmt.Sprintf("%s/k/%d", base, i), nil)
				if want := fmt.Sprintf("GET /k/%d 0\n", i); resp.StatusCode != 200 || string(b) != want {
					t.Fatalf("GET /k/%d: %d %q, want %q", i, resp.StatusCode, b, want)
				}
				if i == 0 {
					xff, via := resp.Header.Get("X-Seen-Xff"), resp.Header.Get("X-Seen-Via")
					t.Logf("backend saw X-Forwarded-For %q, Via %q", xff, via)
					wantVia := map[bool]string{false: "1.1 veer", true: "2 veer"}[name == "haproxy-h2"]
					if xff != "127.0.0.1, 127.0.0.1" || via != wantVia {
						t.Errorf("backend saw X-Forwarded-For %q, Via %q: want the front proxy's and the gateway's hops", xff, via)
					}
				}
			}
			if d := c.dials.Load(); d != 1 {
				t.Errorf("100 sequential requests took %d connections to %s, want 1", d, name)
			}

			big := make([]byte, 4<<20)
			for i := range big {
				big[i] = byte(i * 7 / 3)
			}
			for _, path := range []string{"/up", "/stream/up"} {
				for _, chunked := range []bool{false, true} {
					var body io.Reader = bytes.NewReader(big)
					if chunked {
						body = io.MultiReader(bytes.NewReader(big)) // unknown length: the client sends chunks
					}
					resp, b := c.do(t, "POST", base+path, body)
					if resp.StatusCode != 200 || resp.Header.Get("X-Body-Sha256") != sha(big) {
						t.Fatalf("POST %s (chunked %v): %d %q, backend read %s bytes (%s), sha256 match %v", path, chunked, resp.StatusCode, b,
							resp.Header.Get("X-Body-Len"), resp.Header.Get("X-Framing"), resp.Header.Get("X-Body-Sha256") == sha(big))
					}
					t.Logf("POST %s chunked=%v: backend saw %s", path, chunked, resp.Header.Get("X-Framing"))
				}
			}

			// Concurrent uploads of mixed sizes.
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for w := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 10 {
						n := (w*10 + i) * 6007 % (300 << 10)
						resp, err := c.Post(base+"/stream/mix", "application/octet-stream", bytes.NewReader(big[:n]))
						if err != nil {
							errs <- err
							return
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						_ = resp.Body.Close()
						if resp.StatusCode != 200 || resp.Header.Get("X-Body-Sha256") != sha(big[:n]) {
							errs <- fmt.Errorf("upload of %d bytes: %d, backend read %s", n, resp.StatusCode, resp.Header.Get("X-Body-Len"))
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}

			// A streamed answer of unknown length (1 MB) through both hops;
			// nginx's /h10/ asks the gateway over HTTP/1.0, which must end
			// the answer by closing, not with chunks.
			paths := []string{"/", "/stream/"}
			if name == "nginx" {
				paths = append(paths, "/h10/")
			}
			for _, p := range paths {
				resp, b := c.do(t, "GET", base+p+"dl?stream=1000", nil)
				if resp.StatusCode != 200 || string(b) != streamed(1000) {
					t.Errorf("GET %sdl?stream=1000: %d, %d bytes, want %d intact", p, resp.StatusCode, len(b), len(streamed(1000)))
				}
			}
			if name == "nginx" {
				resp, b := c.do(t, "POST", base+"/h10/up", io.MultiReader(bytes.NewReader(big)))
				if resp.StatusCode != 200 || resp.Header.Get("X-Body-Sha256") != sha(big) || resp.Header.Get("X-Seen-Via") != "1.0 veer" {
					t.Errorf("chunked POST through nginx's HTTP/1.0 proxying: %d %q, backend read %s bytes, Via %q", resp.StatusCode, b,
						resp.Header.Get("X-Body-Len"), resp.Header.Get("X-Seen-Via"))
				}
			}

			pipeline(t, front, 20)
			c.CloseIdleConnections()
			if n := established(t, gw) - before; n > 16+1 {
				t.Errorf("%s keeps %d more connections to the gateway after c=8 load, want at most 17", name, n)
			}
		})
	}
	t.Run("direct", func(t *testing.T) { pipeline(t, gw, 20) })
}

// pipeline writes n POST requests with bodies in one write on one
// connection, then reads n responses, which must come in order, each
// naming its request and the length of its body.
func pipeline(t *testing.T, addr string, n int) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	var req bytes.Buffer
	for i := range n {
		body := bytes.Repeat([]byte{'x'}, i*1000)
		fmt.Fprintf(&req, "POST /pipe/%d HTTP/1.1\r\nHost: pipe.test\r\nContent-Length: %d\r\n\r\n%s", i, len(body), body)
	}
	if _, err := conn.Write(req.Bytes()); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	for i := range n {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("pipelined response %d of %d: %v", i, n, err)
		}
		b, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if want := fmt.Sprintf("POST /pipe/%d %d\n", i, i*1000); err != nil || resp.StatusCode != 200 || string(b) != want {
			t.Fatalf("pipelined response %d: %d %q (err %v), want %q", i, resp.StatusCode, b, err, want)
		}
	}
}
