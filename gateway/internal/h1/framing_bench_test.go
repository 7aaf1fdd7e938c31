package h1

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"runtime"
	"testing"
)

const benchStream = "GET /api/v1/items?id=42 HTTP/1.1\r\nHost: api.example.com\r\nUser-Agent: bench/1.0\r\nAccept: */*\r\n" +
	"Accept-Encoding: gzip\r\nX-Request-Id: 0123456789abcdef\r\nTraceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\r\n\r\n" +
	"POST /api/v1/items HTTP/1.1\r\nHost: api.example.com\r\nContent-Type: application/json\r\nContent-Length: 64\r\n\r\n" +
	`{"name":"item","size":12,"tags":["a","b","c"],"note":"xxxxxxxx"}`

// BenchmarkFramer: the framer's cost per request (two requests a loop).
func BenchmarkFramer(b *testing.B) {
	f := newFramer(maxHeaderBytes)
	in := []byte(benchStream)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if n, r := f.advance(in); n != len(in) || r != fOK {
			b.Fatal(n, r)
		}
	}
}

// BenchmarkConnLayer: one keep-alive client, requests in sequence, to a
// net/http server on a plain listener and on the gateway's connListener
// (framing, ConnState hook, the grace read before parking), and to this
// package's Server on connListener (own: what the gateway runs). Compare
// them with benchstat: the differences are what each layer costs a
// request.
func BenchmarkConnLayer(b *testing.B) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = w.Write([]byte("ok"))
	})
	netHTTP := func(l net.Listener) func() {
		srv := &http.Server{Handler: h, ConnState: ConnState}
		go func() { _ = srv.Serve(l) }()
		return func() { _ = srv.Close() }
	}
	for _, tc := range []struct {
		name  string
		serve func(net.Listener) (stop func())
	}{
		{"nethttp", netHTTP},
		{"connListener", func(l net.Listener) func() {
			return netHTTP(NewListener(l, nil, 0, maxHeaderBytes, nil, discard))
		}},
		{"connListenerNoPark", func(l net.Listener) func() {
			cl := NewListener(l, nil, 0, maxHeaderBytes, nil, discard)
			cl.parkAfter = 0
			return netHTTP(cl)
		}},
		{"own", func(l net.Listener) func() {
			srv := &Server{Handler: h}
			go func() { _ = srv.Serve(NewListener(l, nil, 0, maxHeaderBytes, nil, discard)) }()
			return func() { _ = srv.Close() }
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			stop := tc.serve(ln)
			defer stop()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			br := bufio.NewReader(c)
			req := []byte(benchStream[:len(benchStream)-len(`{"name":"item","size":12,"tags":["a","b","c"],"note":"xxxxxxxx"}`)-len("POST /api/v1/items HTTP/1.1\r\nHost: api.example.com\r\nContent-Type: application/json\r\nContent-Length: 64\r\n\r\n")])
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				if _, err := c.Write(req); err != nil {
					b.Fatal(err)
				}
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
			// CPU time of the process (client and server) per request: less
			// sensitive to a shared machine than ns/op
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkIdleConnMemory measures what an idle keep-alive connection
// holds in a net/http server's process (heap in use after two GCs,
// goroutine stacks; the client's side of each connection, in the same
// process, is counted too), on a plain listener and on connListener once its connections
// are parked. Run it once: go test -run '^$' -bench IdleConnMemory
// -benchtime 1x ./gateway/ (2000 connections each, client in-process).
func BenchmarkIdleConnMemory(b *testing.B) {
	const n = 2000
	for _, tc := range []struct {
		name string
		park bool
	}{{"nethttp", false}, {"connListener", true}} {
		b.Run(tc.name, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			var l net.Listener = ln
			parked := make(chan struct{}, n)
			if tc.park {
				cl := NewListener(ln, nil, 0, maxHeaderBytes, nil, discard)
				cl.onPark = func() { parked <- struct{}{} }
				l = cl
			}
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = w.Write([]byte("ok"))
			}), ConnState: ConnState}
			go func() { _ = srv.Serve(l) }()
			defer srv.Close()
			var ms0, ms1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&ms0)
			conns := make([]net.Conn, 0, n)
			defer func() {
				for _, c := range conns {
					_ = c.Close()
				}
			}()
			buf := make([]byte, 512)
			for range b.N * n {
				c, err := net.Dial("tcp", ln.Addr().String())
				if err != nil {
					b.Fatal(err)
				}
				conns = append(conns, c)
				if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
					b.Fatal(err)
				}
				if _, err := c.Read(buf); err != nil {
					b.Fatal(err)
				}
			}
			if tc.park {
				for range b.N * n {
					<-parked
				}
			}
			runtime.GC()
			runtime.GC() // the second empties sync.Pool's victim cache: net/http's pooled buffers
			runtime.ReadMemStats(&ms1)
			b.ReportMetric(float64(ms1.HeapInuse-ms0.HeapInuse)/float64(b.N*n), "heap-B/conn")
			b.ReportMetric(float64(ms1.StackInuse-ms0.StackInuse)/float64(b.N*n), "stack-B/conn")
		})
	}
}
