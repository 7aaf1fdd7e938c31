package gateway

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/internal/metrictest"
)

func TestRoutingAndHeaders(t *testing.T) {
	echo := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "%s host=%s xff=%s fwd=%s xfh=%s hop=%q te=%q", name, r.Host, r.Header.Get("X-Forwarded-For"),
				r.Header.Get("Forwarded"), r.Header.Get("X-Forwarded-Host"), r.Header.Get("X-Hop"), r.Header.Get("Keep-Alive"))
		}
	}
	a, b, c := upstream(t, echo("a")), upstream(t, echo("b")), upstream(t, echo("c"))
	_, base := startGateway(t, fill(`
routes:
  - {name: api, host: api.example.com, path_prefix: /v1, clusters: [{name: a}]}
  - {name: wild, host: "*.example.com", clusters: [{name: b}], host_rewrite: upstream.internal}
  - {name: any, path_prefix: /static/, clusters: [{name: c}]}
clusters:
  - {name: a, backends: [{address: A}]}
  - {name: b, backends: [{address: B}]}
  - {name: c, backends: [{address: C}]}
`, "A", a, "B", b, "C", c))
	cl := &http.Client{}
	for _, tc := range []struct {
		host, path string
		status     int
		want       string
	}{
		{"api.example.com", "/v1/users", 200, "a host=api.example.com"},
		{"API.example.com:443", "/v1", 200, "a host=API.example.com:443"},
		{"api.example.com", "/v1x", 200, "b host=upstream.internal"}, // segment match: /v1 does not match /v1x
		{"x.example.com", "/", 200, "b host=upstream.internal"},
		{"other.org", "/static/x.css", 200, "c host=other.org"},
		{"other.org", "/nothing", 404, "no route"},
	} {
		resp, body := get(t, cl, base+tc.path, "Host", tc.host)
		if resp.StatusCode != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("%s%s: %d %q, want %d containing %q", tc.host, tc.path, resp.StatusCode, body, tc.status, tc.want)
		}
	}
	// an untrusted caller's X-Forwarded-For and Forwarded are replaced by
	// this hop's (they were appended to before); hop-by-hop removed
	resp, body := get(t, cl, base+"/v1", "Host", "api.example.com", "X-Forwarded-For", "203.0.113.9",
		"Forwarded", "for=203.0.113.9", "Connection", "X-Hop", "X-Hop", "secret", "Keep-Alive", "timeout=5")
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	for _, want := range []string{"xff=127.0.0.1 ", "fwd=for=127.0.0.1;host=api.example.com;proto=http ", "xfh=api.example.com", `hop=""`, `te=""`} {
		if !strings.Contains(body, want) {
			t.Errorf("untrusted: body %q lacks %q", body, want)
		}
	}
	// a trusted caller's chain is kept and this hop appended
	_, tbase := startGateway(t, fill(`
routes: [{name: api, clusters: [{name: a}]}]
clusters: [{name: a, backends: [{address: A}]}]
trusted_networks: [127.0.0.0/8]
`, "A", a))
	_, body = get(t, cl, tbase+"/v1", "Host", "api.example.com", "X-Forwarded-For", "203.0.113.9", "Forwarded", "for=203.0.113.9")
	for _, want := range []string{"xff=203.0.113.9, 127.0.0.1 ", "fwd=for=203.0.113.9, for=127.0.0.1;host=api.example.com;proto=http "} {
		if !strings.Contains(body, want) {
			t.Errorf("trusted: body %q lacks %q", body, want)
		}
	}
}

func TestStreamingIsFlushed(t *testing.T) {
	release := make(chan struct{})
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		<-release
		fmt.Fprint(w, "data: second\n\n")
	})
	_, base := startGateway(t, fill(`
routes: [{name: r, clusters: [{name: c}]}]
clusters: [{name: c, backends: [{address: U}]}]
`, "U", up))
	resp, err := http.Get(base + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n') // arrives while the backend still holds the stream open
	close(release)
	if err != nil || line != "data: first\n" {
		t.Fatalf("first event: %q %v", line, err)
	}
	rest, _ := io.ReadAll(br)
	if !strings.Contains(string(rest), "data: second") {
		t.Fatalf("rest %q", rest)
	}
}

func TestWebSocketUpgradePassthrough(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "websocket" {
			http.Error(w, "want upgrade", 400)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprint(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		_ = brw.Flush()
		line, _ := brw.ReadString('\n') // echo one line in upper case: a two-way byte stream
		fmt.Fprint(brw, strings.ToUpper(line))
		_ = brw.Flush()
	})
	_, base := startGateway(t, fill(`
routes: [{name: r, clusters: [{name: c}]}]
clusters: [{name: c, backends: [{address: U}]}]
`, "U", up))
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprint(c, "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 101 {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	fmt.Fprint(c, "hello\n")
	line, err := br.ReadString('\n')
	if err != nil || line != "HELLO\n" {
		t.Fatalf("echo %q %v", line, err)
	}
}

func TestBadInput(t *testing.T) {
	var hits int
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		hits++
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %d", r.Method, r.URL.Path, len(b))
	})
	_, base := startGateway(t, fill(`
listen: {max_header_bytes: 4096, read_header_timeout: 300ms}
routes: [{name: r, clusters: [{name: c}]}]
clusters: [{name: c, backends: [{address: U}]}]
limits: {max_request_body: 1000}
`, "U", up))
	addr := strings.TrimPrefix(base, "http://")
	status := func(raw string) string {
		out := rawRequest(t, addr, raw)
		if i := strings.Index(out, "\r\n"); i > 0 {
			return out[:i]
		}
		return out
	}
	for _, tc := range []struct{ name, raw, want string }{
		{"oversized header", "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 20000) + "\r\n\r\n", "HTTP/1.1 431"},
		{"declared body too large", "POST / HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 5000\r\n\r\n", "HTTP/1.1 413"},
		{"chunked body too large", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n7d0\r\n" + strings.Repeat("a", 2000) + "\r\n0\r\n\r\n", "HTTP/1.1 413"},
		{"differing duplicate Content-Length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", "HTTP/1.1 400"},
		{"bad chunk framing", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n", "HTTP/1.1 400"},
		{"unknown transfer coding", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", "HTTP/1.1 501"},
		{"bad request line", "GARBAGE\r\n\r\n", "HTTP/1.1 400"},
		// request smuggling shapes: net/http alone would repair and relay these
		{"Content-Length and Transfer-Encoding", "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n" +
			"0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 400"},
		{"identical duplicate Content-Length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nContent-Length: 4\r\n\r\nabcd", "HTTP/1.1 400"},
		{"Transfer-Encoding on HTTP/1.0", "POST / HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "HTTP/1.1 400"},
		{"Content-Length folded in twice", "POST / HTTP/1.1\r\nHost: x\r\ncontent-length: 1\r\nCONTENT-LENGTH:\t1 \r\n\r\na", "HTTP/1.1 400"},
	} {
		if got := status(tc.raw); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: got %q, want %s", tc.name, got, tc.want)
		}
	}
	if hits != 0 {
		t.Errorf("backend saw %d of the bad requests", hits)
	}
	// slowloris: a client that never finishes its header is cut off after
	// read_header_timeout
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprint(c, "GET / HTTP/1.1\r\nHost: x\r\n")
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.ReadAll(c); err != nil {
		t.Errorf("slowloris connection not closed by the server: %v", err)
	}
	// the same on a keep-alive connection after a first request: the
	// framer holds the partial head, and read_header_timeout still applies
	// (not the 90 s idle timeout)
	k, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	_ = k.SetDeadline(time.Now().Add(3 * time.Second))
	br := bufio.NewReader(k)
	fmt.Fprint(k, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("keep-alive request: %v %v", resp, err)
	} else {
		_, _ = io.Copy(io.Discard, resp.Body)
	}
	fmt.Fprint(k, "GET / HTTP/1.1\r\nHost: x\r\n")
	if _, err := io.ReadAll(br); err != nil {
		t.Errorf("slowloris on a keep-alive connection not closed by the server: %v", err)
	}
}

// TestBodyLimitRoutedCountedLogged: a body over limits.max_request_body is
// refused after the route match like every other refusal: the 413 is
// counted in veer_gateway_requests_total under its route and in the guard
// counter, and logged with its route. Before, the guard wrapped the whole
// handler and its 413s reached neither; and a chunked body over both
// max_replay_body and the limit streams, fails while it is relayed, and was
// answered 502 (one chunk or two).
func TestBodyLimitRoutedCountedLogged(t *testing.T) {
	var hits atomic.Int64
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
	})
	logPath := filepath.Join(t.TempDir(), "access.log")
	reg := prometheus.NewRegistry()
	cfg := parseConfig(t, fill(`
routes: [{name: r, clusters: [{name: c}]}]
clusters: [{name: c, backends: [{address: U}]}]
limits: {max_request_body: 1000}
retry: {max_replay_body: 100}
access_log: {path: LOG}
`, "U", up, "LOG", logPath))
	g := startGatewayOpts(t, cfg, Options{Registerer: reg, Gatherer: reg})
	addr := g.Addrs().Plain
	chunked := func(n int) string {
		return fmt.Sprintf("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", n, strings.Repeat("a", n))
	}
	for _, tc := range []struct{ name, raw string }{
		{"declared", "POST / HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 5000\r\n\r\n"},
		{"chunked, two chunks", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n50\r\n" + strings.Repeat("a", 80) + "\r\n7d0\r\n" + strings.Repeat("a", 2000) + "\r\n0\r\n\r\n"},
		{"chunked, streamed", chunked(2000)},
	} {
		if got := rawRequest(t, addr, tc.raw); !strings.HasPrefix(got, "HTTP/1.1 413") {
			t.Errorf("%s: %.40q, want 413", tc.name, got)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := g.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if n := metrictest.Sum(t, reg, "veer_gateway_requests_total", map[string]string{"route": "r"}); n != 3 {
		t.Errorf("requests counted under route r: %v, want 3", n)
	}
	if n := metrictest.Sum(t, reg, "veer_gateway_guard_rejected_total", map[string]string{"guard": "body"}); n != 3 {
		t.Errorf("body refusals counted: %v, want 3", n)
	}
	entries := readLog(t, logPath)
	if len(entries) != 3 {
		t.Fatalf("%d access log entries, want 3", len(entries))
	}
	for _, e := range entries {
		if e["route"] != "r" || e["status"].(float64) != 413 {
			t.Errorf("logged %v %v, want route r status 413", e["route"], e["status"])
		}
	}
}

// TestRequestTrailersKeptWhenBuffered: a chunked request body with
// trailers is buffered for replay and still reaches the backend with its
// trailers, on the first attempt and on a retry to another cluster. Before,
// the buffered body was resent with a Content-Length and the trailers were
// dropped.
func TestRequestTrailersKeptWhenBuffered(t *testing.T) {
	b := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s sum=%s", body, r.Trailer.Get("X-Sum"))
	})
	_, base := startGateway(t, fill(`
routes:
  - {name: one, path_prefix: /one, clusters: [{name: b}]}
  - {name: retry, path_prefix: /retry, clusters: [{name: dead}, {name: b}]}
clusters:
  - {name: b, backends: [{address: B}]}
  - {name: dead, backends: [{address: DEAD}], outlier: {consecutive_errors: 1000}}
`, "B", b, "DEAD", deadAddr(t)))
	for _, path := range []string{"/one", "/retry"} {
		pr, pw := io.Pipe()
		req, _ := http.NewRequest(http.MethodPost, base+path, pr)
		req.Header.Set("Idempotency-Key", "k")
		req.Trailer = http.Header{"X-Sum": nil}
		go func() {
			_, _ = io.WriteString(pw, "payload")
			req.Trailer.Set("X-Sum", "abc")
			_ = pw.Close()
		}()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(got) != "payload sum=abc" {
			t.Errorf("%s: %d %q, want the body and its trailer", path, resp.StatusCode, got)
		}
	}
}
