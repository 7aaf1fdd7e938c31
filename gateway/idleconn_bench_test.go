package gateway

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/veerhq/veer/obs"
)

// BenchmarkIdleClientConnMemory measures what one idle client connection
// costs the gateway's process after one request on it: HTTP/1.1
// keep-alive (parked by the listener after 250 ms) and HTTP/2 with prior
// knowledge (h2c) on the plain listener, each connection's client a bare
// socket (its frames written by hand, so that no client goroutine or buffer
// is counted). Heap in use after two GCs and goroutine stacks, per
// connection. Run it once:
//
//	go test -run '^$' -bench IdleClientConnMemory -benchtime 1x -count 3 ./gateway/
func BenchmarkIdleClientConnMemory(b *testing.B) {
	const n = 1000
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) }))
	defer backend.Close()
	for _, proto := range []string{"h1", "h2c"} {
		b.Run(proto, func(b *testing.B) {
			var cfg Config
			cfg.Listen.Addr, cfg.Listen.Plain = "off", "127.0.0.1:0"
			cfg.Routes = []Route{{Name: "r", Clusters: []RouteCluster{{Name: "c"}}}}
			cfg.Clusters = []Cluster{{Name: "c", Backends: []Backend{{Address: backend.Listener.Addr().String()}}}}
			g, err := New(cfg, Options{Logger: obs.Discard, Registerer: prometheus.NewRegistry()})
			if err != nil {
				b.Fatal(err)
			}
			if err := g.Start(); err != nil {
				b.Fatal(err)
			}
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = g.Shutdown(ctx)
			}()
			addr := g.Addrs().Plain
			parked := make(chan struct{}, n)
			if proto == "h1" {
				g.srv.lns[0].SetOnPark(func() { parked <- struct{}{} })
			}
			var ms0, ms1 runtime.MemStats
			runtime.GC()
			runtime.GC()
			runtime.ReadMemStats(&ms0)
			g0 := runtime.NumGoroutine()
			conns := make([]net.Conn, 0, n)
			defer func() {
				for _, c := range conns {
					_ = c.Close()
				}
			}()
			for range b.N * n {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					b.Fatal(err)
				}
				conns = append(conns, c)
				if proto == "h1" {
					err = oneH1(c)
				} else {
					err = oneH2(c)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			if proto == "h1" {
				for range b.N * n {
					<-parked
				}
			} else {
				time.Sleep(500 * time.Millisecond) // as long as h1's wait to park: the same idle age
			}
			runtime.GC()
			runtime.GC() // the second empties sync.Pool's victim cache: net/http's pooled buffers
			runtime.ReadMemStats(&ms1)
			per := float64(b.N * n)
			b.ReportMetric(float64(int64(ms1.HeapInuse)-int64(ms0.HeapInuse))/per, "heap-B/conn")
			b.ReportMetric(float64(int64(ms1.StackInuse)-int64(ms0.StackInuse))/per, "stack-B/conn")
			b.ReportMetric(float64(runtime.NumGoroutine()-g0)/per, "goroutines/conn")
		})
	}
}

// oneH1 sends one keep-alive GET on c and reads its answer.
func oneH1(c net.Conn) error {
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// oneH2 speaks HTTP/2 with prior knowledge on c: the preface, SETTINGS,
// one GET on stream 1, its answer read to END_STREAM (the server's
// SETTINGS acknowledged).
func oneH2(c net.Conn) error {
	fr := http2.NewFramer(c, c)
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		return err
	}
	if err := fr.WriteSettings(); err != nil {
		return err
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {":authority", "x"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		return err
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return err
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				if err := fr.WriteSettingsAck(); err != nil {
					return err
				}
			}
		case *http2.DataFrame:
			if f.StreamEnded() {
				return nil
			}
		case *http2.HeadersFrame:
			if f.StreamEnded() {
				return nil
			}
		case *http2.GoAwayFrame:
			return fmt.Errorf("GOAWAY %v", f.ErrCode)
		}
	}
}
