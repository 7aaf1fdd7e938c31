package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/internal/metrictest"
)

// pathLog records what reached a backend.
type pathLog struct {
	mu    sync.Mutex
	paths []string
}

func (p *pathLog) handler(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	p.mu.Lock()
	p.paths = append(p.paths, r.Method+" "+r.URL.Path+" "+string(b))
	p.mu.Unlock()
	fmt.Fprintf(w, "%s %s %q via=%q proto=%s fwd=%s", r.Method, r.URL.Path, b, r.Header.Get("Via"), r.Header.Get("X-Forwarded-Proto"), r.Header.Get("Forwarded"))
}

func (p *pathLog) get() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.paths...)
}

// startSmugglingGateway runs a gateway on a plain port with its own
// registry, in front of a backend that records what reaches it.
func startSmugglingGateway(t *testing.T) (addr string, seen *pathLog, reg *prometheus.Registry) {
	t.Helper()
	seen = &pathLog{}
	up := upstream(t, seen.handler)
	cfg := parseConfig(t, fill(`
routes: [{name: r, clusters: [{name: c}]}]
clusters: [{name: c, backends: [{address: U}]}]
`, "U", up))
	reg = prometheus.NewRegistry()
	g := startGatewayOpts(t, cfg, Options{Registerer: reg, Gatherer: reg})
	return g.Addrs().Plain, seen, reg
}

// readResponses reads responses from raw until the server closes.
func readResponses(t *testing.T, c net.Conn, raw string) []string {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	var out []string
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return out
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		out = append(out, fmt.Sprintf("%d %s", resp.StatusCode, b))
	}
}

// A good request pipelined before a smuggling attempt is answered; the
// attempt gets 400 after it, the connection closes, and nothing of the
// attempt (nor the request hidden in its body) reaches the backend.
func TestSmugglingAfterPipelinedRequest(t *testing.T) {
	addr, seen, reg := startSmugglingGateway(t)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got := readResponses(t, c, "GET /first HTTP/1.1\r\nHost: x\r\n\r\n"+
		"POST /second HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n"+
		"0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n")
	if len(got) != 2 || !strings.HasPrefix(got[0], `200 GET /first ""`) || !strings.HasPrefix(got[1], "400 ") {
		t.Fatalf("responses %q, want 200 for /first then 400", got)
	}
	if p := seen.get(); len(p) != 1 || p[0] != "GET /first " {
		t.Fatalf("backend saw %q, want only GET /first", p)
	}
	if n := metrictest.Sum(t, reg, "veer_gateway_guard_rejected_total", map[string]string{"guard": "framing"}); n != 1 {
		t.Fatalf("framing rejections counted %v, want 1", n)
	}
}

// Valid framing passes: a chunked body with a trailer and a request
// pipelined after it; a Content-Length body; a POST followed by the extra
// CRLF old clients send.
func TestValidFramingPasses(t *testing.T) {
	addr, seen, reg := startSmugglingGateway(t)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got := readResponses(t, c, "POST /chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTrailer: T\r\n\r\n"+
		"3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nT: tv\r\n\r\n"+
		"POST /cl HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nxy\r\n"+
		"GET /last HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	want := []string{`200 POST /chunked "abcde"`, `200 POST /cl "xy"`, `200 GET /last ""`}
	if len(got) != len(want) {
		t.Fatalf("responses %q, want %d", got, len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("response %d: %q, want %q...", i, got[i], want[i])
		}
	}
	if p := seen.get(); len(p) != 3 {
		t.Fatalf("backend saw %q", p)
	}
	if n := metrictest.Sum(t, reg, "veer_gateway_guard_rejected_total", map[string]string{"guard": "framing"}); n != 0 {
		t.Fatalf("framing rejections counted %v, want 0", n)
	}
}

// An Upgrade request the backend does not upgrade leaves the connection in
// HTTP/1.1, and framing resumes: a smuggling attempt after it is refused.
// (The bytes after an Upgrade request are held until net/http either
// hijacks the connection or reads the next request.)
func TestSmugglingAfterRefusedUpgrade(t *testing.T) {
	addr, seen, _ := startSmugglingGateway(t)
	for _, up := range []string{"websocket", "h2c"} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		got := readResponses(t, c, "GET /up HTTP/1.1\r\nHost: x\r\nUpgrade: "+up+"\r\nConnection: Upgrade\r\n\r\n"+
			"POST /second HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc")
		_ = c.Close()
		if len(got) != 2 || !strings.HasPrefix(got[0], `200 GET /up ""`) || !strings.HasPrefix(got[1], "400 ") {
			t.Fatalf("Upgrade: %s: responses %q, want 200 then 400", up, got)
		}
	}
	if p := seen.get(); len(p) != 2 || p[0] != "GET /up " || p[1] != "GET /up " {
		t.Fatalf("backend saw %q, want only the two upgrade requests", p)
	}
}
