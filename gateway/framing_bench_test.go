package gateway

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user + system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

const benchStream = "GET /api/v1/items?id=42 HTTP/1.1\r\nHost: api.example.com\r\nUser-Agent: bench/1.0\r\nAccept: */*\r\n" +
	"Accept-Encoding: gzip\r\nX-Request-Id: 0123456789abcdef\r\nTraceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\r\n\r\n" +
	"POST /api/v1/items HTTP/1.1\r\nHost: api.example.com\r\nContent-Type: application/json\r\nContent-Length: 64\r\n\r\n" +
	`{"name":"item","size":12,"tags":["a","b","c"],"note":"xxxxxxxx"}`

// BenchmarkFramer: the framer's cost per request (two requests a loop).
func BenchmarkFramer(b *testing.B) {
	f := newFramer(DefaultMaxHeaderBytes)
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
// (framing, ConnState hook, the grace read before parking). Compare the
// two with benchstat: the difference is what the layer costs a request.
func BenchmarkConnLayer(b *testing.B) {
	for _, tc := range []struct {
		name string
		wrap func(net.Listener) net.Listener
	}{
		{"nethttp", func(l net.Listener) net.Listener { return l }},
		{"connListener", func(l net.Listener) net.Listener {
			return newConnListener(l, nil, 0, DefaultMaxHeaderBytes, nil, obsDiscard())
		}},
		{"connListenerNoPark", func(l net.Listener) net.Listener {
			cl := newConnListener(l, nil, 0, DefaultMaxHeaderBytes, nil, obsDiscard())
			cl.parkAfter = 0
			return cl
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				_, _ = w.Write([]byte("ok"))
			}), ConnState: connState}
			go func() { _ = srv.Serve(tc.wrap(ln)) }()
			defer srv.Close()
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
