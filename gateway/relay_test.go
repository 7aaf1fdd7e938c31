package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/obs"
)

// oneRoute starts a gateway with one route to the backend at addr, with
// extra cluster fields.
func oneRoute(t *testing.T, addr, clusterExtra string) string {
	t.Helper()
	_, base := startGateway(t, fill(`
routes: [{name: r, clusters: [{name: c}]}]
clusters: [{name: c, backends: [{address: U}]EXTRA}]
`, "U", addr, "EXTRA", clusterExtra))
	return base
}

// TestRelayHopByHop: the hop-by-hop fields (RFC 9110 §7.6.1) are removed
// in both directions, those the Connection field names too; Te: trailers
// is kept when the client sent it; an Upgrade without "upgrade" in
// Connection is not an upgrade and is removed.
func TestRelayHopByHop(t *testing.T) {
	var seen http.Header
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header.Clone()
		h := w.Header()
		h.Set("Connection", "X-Back-Hop")
		h.Set("X-Back-Hop", "1")
		h.Set("Keep-Alive", "timeout=5")
		h.Set("Proxy-Authenticate", "Basic")
		h.Set("Upgrade", "foo")
		h.Set("X-End", "kept")
		_, _ = io.WriteString(w, "ok")
	})
	addr := strings.TrimPrefix(oneRoute(t, up, ""), "http://")
	for _, tc := range []struct {
		te, wantTe string
	}{{"trailers, deflate", "trailers"}, {"deflate", ""}} {
		raw := "GET /x HTTP/1.1\r\nHost: x\r\nConnection: X-Hop, x-other, close\r\nX-Hop: secret\r\nX-Other: o\r\n" +
			"Keep-Alive: timeout=5\r\nProxy-Connection: keep-alive\r\nProxy-Authorization: Basic eA==\r\n" +
			"Te: " + tc.te + "\r\nUpgrade: foo\r\nX-End: kept\r\n\r\n"
		out := rawRequest(t, addr, raw)
		resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(out)), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("answer %q: %v", out, err)
		}
		for _, k := range []string{"Connection", "X-Hop", "X-Other", "Keep-Alive", "Proxy-Connection", "Proxy-Authorization", "Upgrade"} {
			if v, ok := seen[k]; ok {
				t.Errorf("te %q: backend got %s: %q", tc.te, k, v)
			}
		}
		if got := seen.Get("Te"); got != tc.wantTe {
			t.Errorf("te %q: backend got Te %q, want %q", tc.te, got, tc.wantTe)
		}
		if seen.Get("X-End") != "kept" {
			t.Errorf("an end-to-end field was lost: %v", seen)
		}
		for _, k := range []string{"X-Back-Hop", "Keep-Alive", "Proxy-Authenticate", "Upgrade"} {
			if v, ok := resp.Header[k]; ok {
				t.Errorf("client got %s: %q", k, v)
			}
		}
		if resp.Header.Get("X-End") != "kept" {
			t.Errorf("an end-to-end answer field was lost: %v", resp.Header)
		}
	}
}

// TestRelayQueryCleaned: a query net/url cannot parse whole reaches the
// backend re-encoded, as httputil's Rewrite mode sends it: the backend
// sees the parameters the gateway saw.
func TestRelayQueryCleaned(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, r.URL.RawQuery) })
	base := oneRoute(t, up, "")
	for q, want := range map[string]string{"a=1&b=2": "a=1&b=2", "b=2&a=1;c=3": "b=2", "a=%zz&b=1": "b=1"} {
		if _, body := get(t, http.DefaultClient, base+"/x?"+q); body != want {
			t.Errorf("query %q reached the backend as %q, want %q", q, body, want)
		}
	}
}

// TestRelayStreamFlushed: an answer of unknown length and an event stream
// are flushed as they come: the first piece reaches the client while the
// backend still holds the rest.
func TestRelayStreamFlushed(t *testing.T) {
	for _, ct := range []string{"text/event-stream; charset=utf-8", "application/octet-stream"} {
		release := make(chan struct{})
		up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", ct)
			fmt.Fprint(w, "first\n")
			w.(http.Flusher).Flush() // chunked: no Content-Length
			<-release
			fmt.Fprint(w, "second\n")
		})
		resp, err := http.Get(oneRoute(t, up, "") + "/s")
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(resp.Body)
		line, err := br.ReadString('\n')
		close(release)
		if err != nil || line != "first\n" {
			t.Fatalf("%s: first piece %q %v", ct, line, err)
		}
		if rest, _ := io.ReadAll(br); string(rest) != "second\n" {
			t.Errorf("%s: rest %q", ct, rest)
		}
		resp.Body.Close()
	}
}

// TestRelayTrailers: trailers the backend announced, and those it did not
// (http.TrailerPrefix), reach the client after the body.
func TestRelayTrailers(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/unannounced" {
			w.Header().Set("Trailer", "X-Announced")
		}
		_, _ = io.WriteString(w, "body")
		w.(http.Flusher).Flush()
		if r.URL.Path != "/unannounced" {
			w.Header().Set("X-Announced", "a")
		}
		if r.URL.Path != "/announced" {
			w.Header().Set(http.TrailerPrefix+"X-Late", "b")
		}
	})
	base := oneRoute(t, up, "")
	for path, want := range map[string]http.Header{
		"/announced":   {"X-Announced": {"a"}},
		"/unannounced": {"X-Late": {"b"}},
		"/both":        {"X-Announced": {"a"}, "X-Late": {"b"}},
	} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(body) != "body" {
			t.Fatalf("%s: body %q %v", path, body, err)
		}
		for k, v := range want {
			if got := resp.Trailer.Get(k); got != v[0] {
				t.Errorf("%s: trailer %s %q, want %q (trailers %v)", path, k, got, v[0], resp.Trailer)
			}
		}
	}
}

// TestRelayBrokenBody: a backend that dies in the middle of its body
// leaves the client with a broken answer (the gateway aborts the
// connection), never with a short one that looks whole; sized or chunked.
func TestRelayBrokenBody(t *testing.T) {
	for _, head := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\na\r\n0123456789\r\n",
	} {
		up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
			c, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, head)
			_ = c.Close()
		})
		resp, err := http.Get(oneRoute(t, up, "") + "/b")
		if err != nil && strings.Contains(head, "Content-Length") {
			continue // the head had not left yet: the connection closed before it
		}
		if err != nil {
			t.Fatal(err) // a stream's head is flushed at once
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			t.Errorf("%.40q: the client read %q and a clean end, want an error", head, body)
		}
	}
}

// TestRelayUpgradeMismatch: a 101 to another protocol than the one asked
// for is not relayed (502), and the client's connection is not handed over.
func TestRelayUpgradeMismatch(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		fmt.Fprint(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: other\r\nConnection: Upgrade\r\n\r\n")
		_ = brw.Flush()
	})
	addr := strings.TrimPrefix(oneRoute(t, up, ""), "http://")
	out := rawRequest(t, addr, "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
	if !strings.HasPrefix(out, "HTTP/1.1 502") {
		t.Errorf("answer %.60q, want 502", out)
	}
}

// TestRelayUpgradeBothWays: an upgraded connection carries bytes both ways,
// and the backend's end of output reaches the client as the end of its
// input.
func TestRelayUpgradeBothWays(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Connection") != "Upgrade" || r.Header.Get("Upgrade") != "x-echo" {
			http.Error(w, "want Connection: Upgrade, Upgrade: x-echo", 400)
			return
		}
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		fmt.Fprint(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x-echo\r\nConnection: Upgrade\r\n\r\n")
		_ = brw.Flush()
		in := make([]byte, 100000)
		n, _ := io.ReadFull(brw, in)
		fmt.Fprintf(brw, "got %d bytes", n)
		_ = brw.Flush()
	})
	addr := strings.TrimPrefix(oneRoute(t, up, ""), "http://")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprint(c, "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: x-echo\r\nConnection: keep-alive, Upgrade\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 101 {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	fmt.Fprint(c, strings.Repeat("z", 100000))
	rest, err := io.ReadAll(br) // to the backend's close
	if string(rest) != "got 100000 bytes" || err != nil {
		t.Errorf("echo: %q %v", rest, err)
	}
}

// TestRelayInterim: a 1xx answer (103 Early Hints) reaches the client
// when the attempt goes through http.Transport (a cluster with a
// connection cap), with its own fields only; the gateway's own HTTP/1.1
// client skips interim answers, as it did behind httputil.ReverseProxy.
func TestRelayInterim(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</s.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		w.Header().Set("X-Final", "1")
		_, _ = io.WriteString(w, "final")
	})
	for _, tc := range []struct {
		extra string
		want  []int
	}{{"", nil}, {", max_conns_per_backend: 4", []int{103}}} {
		base := oneRoute(t, up, tc.extra)
		var got []int
		var links []string
		trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
			got = append(got, code)
			links = append(links, h.Get("Link"))
			return nil
		}}
		req, _ := http.NewRequest(http.MethodGet, base+"/p", nil)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "final" || resp.Header.Get("X-Final") != "1" || resp.Header.Get("Link") != "" {
			t.Errorf("cluster%q: final answer %d %q %v", tc.extra, resp.StatusCode, body, resp.Header)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("cluster%q: 1xx answers %v, want %v", tc.extra, got, tc.want)
		}
		if len(got) > 0 && links[0] != "</s.css>; rel=preload" {
			t.Errorf("103 without its Link: %q", links[0])
		}
	}
}

// headerWatch counts the Header calls made after WriteHeader: each makes
// the HTTP/1 server copy the header (net/http's rule that later changes
// are not sent).
type headerWatch struct {
	http.ResponseWriter
	wrote, late int
}

func (h *headerWatch) Header() http.Header {
	if h.wrote > 0 {
		h.late++
	}
	return h.ResponseWriter.Header()
}

func (h *headerWatch) WriteHeader(code int) { h.wrote++; h.ResponseWriter.WriteHeader(code) }

// TestRelayHeaderNotReadAfterAnswer: a relayed answer's header is not
// read after its WriteHeader (finish reads it only for a 5xx, whose
// Veer-Outcome it reports), and a refusal's outcome is still counted by
// its kind.
func TestRelayHeaderNotReadAfterAnswer(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	g := startGatewayOpts(t, parseConfig(t, fill(`
routes: [{name: r, clusters: [{name: c}]}]
clusters: [{name: c, backends: [{address: U}]}]
retry: {disabled: true}
`, "U", up)), Options{})
	w := &headerWatch{ResponseWriter: httptest.NewRecorder()}
	g.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "http://x/a", nil))
	if rec := w.ResponseWriter.(*httptest.ResponseRecorder); rec.Code != 200 || w.wrote != 1 || w.late != 0 {
		t.Fatalf("status %d, WriteHeader %d times, Header read %d times after it; want 200, 1, 0", rec.Code, w.wrote, w.late)
	}
}

// TestRelayForwardingValues: the values this hop sets, built in one
// buffer: X-Forwarded-For after a trusted caller's chain, Forwarded with
// an IPv6 client quoted and a Host that is not a token escaped, a
// traceparent whose ids are the hop's; an untrusted caller's chains are
// dropped; an address without a port is used as it is.
func TestRelayForwardingValues(t *testing.T) {
	g, err := New(parseConfig(t, "listen: {addr: 'off'}\nroutes: [{name: r, clusters: [{name: c}]}]\nclusters: [{name: c, backends: [{address: '127.0.0.1:1'}]}]\n"), Options{Logger: obs.Discard, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for _, tc := range []struct {
		remote, host string
		trusted      bool
		xff, fwd     string // sent by the caller
		wantXFF      []string
		wantFwd      string
	}{
		{"192.0.2.1:5", "example.com", false, "203.0.113.9", "for=203.0.113.9", []string{"192.0.2.1"}, "for=192.0.2.1;host=example.com;proto=http"},
		{"192.0.2.1:5", "example.com:8080", true, "203.0.113.9", "for=203.0.113.9", []string{"203.0.113.9, 192.0.2.1"}, `for=203.0.113.9, for=192.0.2.1;host="example.com:8080";proto=http`},
		{"[2001:db8::1]:5", `a"b\c`, false, "", "", []string{"2001:db8::1"}, `for="[2001:db8::1]";host="a\"b\\c";proto=http`},
		{"@", "h", false, "", "", nil, "for=@;host=h;proto=http"},
	} {
		in := httptest.NewRequest(http.MethodGet, "http://x/", nil)
		in.RemoteAddr, in.Host = tc.remote, tc.host
		if tc.xff != "" {
			in.Header["X-Forwarded-For"] = []string{tc.xff}
			in.Header["Forwarded"] = []string{tc.fwd}
		}
		in.Header["Tracestate"] = []string{"k=v"}
		x := &exchange{st: reqState{input: input{route: g.snap.Load().routes[0]}, trusted: tc.trusted}}
		out := in.WithContext(in.Context())
		if _, err := g.outHeader(out, in, x); err != nil {
			t.Fatal(err)
		}
		h := withExtra(out, x.st.extra).Header
		if !slices.Equal(h["X-Forwarded-For"], tc.wantXFF) || h.Get("Forwarded") != tc.wantFwd || h.Get("X-Forwarded-Host") != tc.host {
			t.Errorf("%s %q trusted %v: X-Forwarded-For %q, Forwarded %q, X-Forwarded-Host %q; want %q, %q", tc.remote, tc.host, tc.trusted,
				h["X-Forwarded-For"], h.Get("Forwarded"), h.Get("X-Forwarded-Host"), tc.wantXFF, tc.wantFwd)
		}
		tp := h.Get("Traceparent")
		if id, _, ok := parseTraceparent(tp); !ok || id != x.st.hop.traceID || tp[36:52] != x.st.hop.spanID || x.st.hop.parentID != "" {
			t.Errorf("traceparent %q, hop %+v", tp, x.st.hop)
		}
		if _, ok := h["Tracestate"]; ok {
			t.Error("the tracestate of a trace the gateway started was forwarded")
		}
		for _, f := range x.st.extra {
			if _, ok := out.Header[f.Key]; ok {
				t.Errorf("%s both in the header map and among the extra fields", f.Key)
			}
		}
	}
}

// TestRelayFieldsEveryTransport: the fields the relay sets (kept out of
// the client's header map, written by the own HTTP/1.1 client after it)
// reach the backend the same way through http.Transport (a body too large
// for the own client) and through an h2c cluster: hop-by-hop fields
// and those Connection names removed, Te: trailers kept, Via appended to,
// X-Forwarded-* and Forwarded this hop's, a traceparent, no User-Agent of
// the gateway's own, no field twice.
func TestRelayFieldsEveryTransport(t *testing.T) {
	seen := make(chan http.Header, 1)
	h := func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		seen <- r.Header.Clone()
		_, _ = io.WriteString(w, "ok")
	}
	h1addr := upstream(t, h)
	h2 := httptest.NewUnstartedServer(http.HandlerFunc(h))
	h2.Config.Protocols = new(http.Protocols)
	h2.Config.Protocols.SetUnencryptedHTTP2(true)
	h2.Start()
	t.Cleanup(h2.Close)
	_, base := startGateway(t, fill(`
routes: [{name: r, clusters: [{name: c}]}, {name: r2, path_prefix: /h2, clusters: [{name: c2}]}]
clusters:
  - {name: c, backends: [{address: U}]}
  - {name: c2, protocol: h2c, backends: [{address: U2}]}
retry: {disabled: true}
`, "U2", strings.TrimPrefix(h2.URL, "http://"), "U", h1addr))
	addr := strings.TrimPrefix(base, "http://")
	head := "Host: x\r\nConnection: X-Hop, close\r\nX-Hop: secret\r\nTe: trailers\r\nVia: 1.0 far\r\n" +
		"X-Forwarded-For: 203.0.113.9\r\nForwarded: for=203.0.113.9\r\nTraceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\r\nX-End: kept\r\n"
	big := strings.Repeat("b", 20<<10)
	var got []http.Header
	for _, raw := range []string{
		"GET /a HTTP/1.1\r\n" + head + "\r\n",                                 // the own client
		"POST /a HTTP/1.1\r\n" + head + "Content-Length: 20480\r\n\r\n" + big, // http.Transport
		"GET /h2/a HTTP/1.1\r\n" + head + "\r\n",                              // HTTP/2
	} {
		if out := rawRequest(t, addr, raw+""); !strings.HasPrefix(out, "HTTP/1.1 200") {
			t.Fatalf("answer %q", out)
		}
		got = append(got, <-seen)
	}
	for i, h := range got {
		want := map[string]string{
			"Te": "trailers", "Via": "1.0 far, 1.1 veer", "X-Forwarded-For": "127.0.0.1", "X-Forwarded-Host": "x",
			"X-Forwarded-Proto": "http", "Forwarded": "for=127.0.0.1;host=x;proto=http", "X-End": "kept", "User-Agent": "",
		}
		for k, v := range want {
			if g := strings.Join(h.Values(k), ", "); g != v {
				t.Errorf("request %d: %s %q, want %q", i, k, g, v)
			}
		}
		for _, k := range []string{"Connection", "X-Hop", "Keep-Alive"} {
			if _, ok := h[k]; ok {
				t.Errorf("request %d: %s sent", i, k)
			}
		}
		if tp := h.Values("Traceparent"); len(tp) != 1 || !strings.HasPrefix(tp[0], "00-0af7651916cd43dd8448eb211c80319c-") || strings.Contains(tp[0], "b7ad6b7169203331") {
			t.Errorf("request %d: traceparent %q", i, tp)
		}
	}
}
