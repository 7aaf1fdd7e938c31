// Command gatewaybench runs veer's gateway side by side with HAProxy, nginx,
// Caddy (Debian packages) and a tuned net/http/httputil.ReverseProxy, in
// interleaved rounds: one Go backend pinned to core 0 (with this load
// generator), each proxy alone on core 1 with one worker / GOMAXPROCS=1.
// Per contender it reports the proxy's CPU µs per request (from /proc),
// requests/s at c=64, the p50/p99 it adds at c=1 over the backend reached
// directly in the same round, HTTP/2 and HTTP/3 rows for veer and Caddy, and
// the RSS of 10 000 idle keep-alive client connections.
//
// Usage (make bench-gateway): taskset -c 0 gatewaybench -veer bin/veer [-rounds 3] [-d 3s]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	gw "github.com/veerhq/veer/bench/gateway"
)

func main() {
	role := flag.String("role", "", "internal: backend or reverseproxy")
	listen := flag.String("listen", "", "internal: listen address")
	backend := flag.String("backend", "", "internal: backend address")
	veer := flag.String("veer", "bin/veer", "path of the veer binary")
	rounds := flag.Int("rounds", 3, "interleaved rounds")
	d := flag.Duration("d", 3*time.Second, "measured duration of each load run (plus a 20% warm-up)")
	only := flag.String("only", "", "comma-separated contender names to run (default all)")
	idle := flag.Int("idle", 10000, "idle keep-alive connections for the memory row (0: skip)")
	idleWait := flag.Duration("idle-wait", time.Second, "how long the idle connections stay before RSS is read")
	idleWait2 := flag.Duration("idle-wait2", 10*time.Second, "RSS is read again after this long idle (0: not), to show what an idle connection holds beyond the first second")
	flag.Parse()
	switch *role {
	case "backend":
		serveBackend(*listen)
		return
	case "reverseproxy":
		serveReverseProxy(*listen, *backend)
		return
	}
	raiseNofile()
	if err := run(*veer, *rounds, *d, *only, *idle, *idleWait, *idleWait2); err != nil {
		fmt.Fprintln(os.Stderr, "gatewaybench:", err)
		os.Exit(1)
	}
}

func serveBackend(addr string) {
	body := []byte("ok\n")
	_ = http.ListenAndServe(addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write(body)
	}))
}

// serveReverseProxy is the tuned Go baseline: one host, a keep-alive pool
// as large as the load, no compression, pooled buffers.
func serveReverseProxy(addr, backend string) {
	u, _ := url.Parse("http://" + backend)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true, IdleConnTimeout: 90 * time.Second,
		DialContext: (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext}
	rp.BufferPool = &bufPool{}
	srv := &http.Server{Addr: addr, Handler: rp, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 90 * time.Second}
	_ = srv.ListenAndServe()
}

// bufPool recycles the 32 KiB copy buffers.
type bufPool struct{ p sync.Pool }

func (b *bufPool) Get() []byte {
	if x, ok := b.p.Get().(*[]byte); ok {
		return *x
	}
	return make([]byte, 32<<10)
}

func (b *bufPool) Put(x []byte) { b.p.Put(&x) }

func raiseNofile() {
	var r syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r) == nil {
		r.Cur = max(r.Cur, min(r.Max, 65536))
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r)
	}
}

type row struct {
	cpuUS, rps, p50, p99 []float64 // per round
}

func run(veer string, rounds int, d time.Duration, only string, idle int, idleWait, idleWait2 time.Duration) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if _, err := os.Stat(veer); err != nil {
		return fmt.Errorf("veer binary: %w (make bench-gateway builds it)", err)
	}
	for _, tool := range []string{"haproxy", "nginx", "caddy", "taskset"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s missing: run bench/gateway/deps.sh (make bench-gateway does)", tool)
		}
	}
	bport := gw.FreePort()
	baddr := fmt.Sprintf("127.0.0.1:%d", bport)
	be := exec.Command("taskset", "-c", "0", self, "-role", "backend", "-listen", baddr)
	be.Env = append(os.Environ(), "GOMAXPROCS=1")
	if err := be.Start(); err != nil {
		return err
	}
	defer func() { _ = be.Process.Kill(); _ = be.Wait() }()
	direct := gw.Client("h1", 1)
	if err := gw.WaitReady(func() error { return get(direct, "http://"+baddr+"/") }); err != nil {
		return fmt.Errorf("backend: %w", err)
	}
	contenders := gw.Contenders(veer, self)
	if only != "" {
		contenders = slices.DeleteFunc(contenders, func(c gw.Contender) bool { return !strings.Contains(","+only+",", ","+c.Name+",") })
	}
	fmt.Printf("# gatewaybench %s: %d rounds, %s per run (+20%% warm-up), GOMAXPROCS=%d, load %s\n\n",
		time.Now().UTC().Format(time.RFC3339), rounds, d, runtime.GOMAXPROCS(0), loadavg())
	rows := map[string]*row{}
	key := func(name, proto string) string { return name + " " + proto }
	var baseP50, baseP99 []float64
	for r := 1; r <= rounds; r++ {
		b := gw.Run(context.Background(), direct, "http://"+baddr+"/", 1, d/2)
		baseP50 = append(baseP50, us(b.Quantile(0.5)))
		baseP99 = append(baseP99, us(b.Quantile(0.99)))
		for _, c := range contenders {
			if err := round(c, baddr, d, rows, key, b); err != nil {
				fmt.Fprintf(os.Stderr, "round %d %s: %v\n", r, c.Name, err)
			}
		}
		fmt.Fprintf(os.Stderr, "round %d done\n", r)
	}
	report(contenders, rows, key, baseP50, baseP99)
	if idle > 0 {
		for _, c := range contenders {
			if c.Name != "veer guards" && c.Name != "haproxy" { // haproxy: maxconn is bound by the fd limit (20000 here)
				if err := idleRow(c, baddr, idle, idleWait, idleWait2); err != nil {
					fmt.Fprintf(os.Stderr, "idle %s: %v\n", c.Name, err)
				}
			}
		}
	}
	return nil
}

func round(c gw.Contender, baddr string, d time.Duration, rows map[string]*row, key func(string, string) string, base gw.Result) error {
	dir, err := os.MkdirTemp("", "gatewaybench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	plain, tlsPort := gw.FreePort(), gw.FreePort()
	cmd, err := c.Start(dir, baddr, plain, tlsPort)
	if err != nil {
		return err
	}
	logf, _ := os.Create(dir + "/out.log")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	one := gw.Client("h1", 1)
	if err := gw.WaitReady(func() error { return get(one, fmt.Sprintf("http://127.0.0.1:%d/", plain)) }); err != nil {
		return fmt.Errorf("%w; log: %s", err, gw.Tail(dir+"/out.log", 5))
	}
	pid := cmd.Process.Pid
	for _, proto := range c.Protos {
		u := fmt.Sprintf("http://127.0.0.1:%d/", plain)
		if proto != "h1" {
			u = fmt.Sprintf("https://127.0.0.1:%d/", tlsPort)
			if err := gw.WaitReady(func() error { return get(gw.Client(proto, 1), u) }); err != nil {
				return fmt.Errorf("%s: %w", proto, err)
			}
		}
		cl := gw.Client(proto, 64)
		cpu0 := gw.CPUSeconds(pid)
		res := gw.Run(context.Background(), cl, u, 64, d)
		cpu := gw.CPUSeconds(pid) - cpu0
		k := key(c.Name, proto)
		if rows[k] == nil {
			rows[k] = &row{}
		}
		rw := rows[k]
		if res.Errors > 0 {
			fmt.Fprintf(os.Stderr, "%s: %d errors of %d\n", k, res.Errors, res.Requests)
		}
		rw.cpuUS = append(rw.cpuUS, cpu/float64(res.Total)*1e6)
		rw.rps = append(rw.rps, float64(res.Requests)/res.Elapsed.Seconds())
		if proto == "h1" {
			lat := gw.Run(context.Background(), one, u, 1, d/2)
			rw.p50 = append(rw.p50, us(lat.Quantile(0.5))-us(base.Quantile(0.5)))
			rw.p99 = append(rw.p99, us(lat.Quantile(0.99))-us(base.Quantile(0.99)))
		}
		if t, ok := cl.Transport.(interface{ CloseIdleConnections() }); ok {
			t.CloseIdleConnections()
		}
	}
	return nil
}

func report(cs []gw.Contender, rows map[string]*row, key func(string, string) string, b50, b99 []float64) {
	fmt.Printf("Backend reached directly at c=1: p50 %.0f µs, p99 %.0f µs (median of rounds).\n\n", median(b50), median(b99))
	fmt.Println("| contender | proto | proxy CPU µs/request, median [min..max] | req/s at c=64, median [min..max] | added p50 at c=1 (µs) | added p99 at c=1 (µs) |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, c := range cs {
		for _, p := range c.Protos {
			r := rows[key(c.Name, p)]
			if r == nil {
				continue
			}
			lat50, lat99 := "", ""
			if p == "h1" {
				lat50, lat99 = fmt.Sprintf("%.0f", median(r.p50)), fmt.Sprintf("%.0f", median(r.p99))
			}
			fmt.Printf("| %s | %s | %.1f [%.1f..%.1f] | %.0f [%.0f..%.0f] | %s | %s |\n", c.Name, p,
				median(r.cpuUS), slices.Min(r.cpuUS), slices.Max(r.cpuUS), median(r.rps), slices.Min(r.rps), slices.Max(r.rps), lat50, lat99)
		}
	}
	fmt.Println()
	ratio := func(a, b string) {
		ra, rb := rows[key(a, "h1")], rows[key(b, "h1")]
		if ra == nil || rb == nil {
			return
		}
		var rs []float64
		for i := range min(len(ra.cpuUS), len(rb.cpuUS)) {
			rs = append(rs, ra.cpuUS[i]/rb.cpuUS[i])
		}
		fmt.Printf("- CPU per request, %s / %s (HTTP/1.1, per round): median %.2f [%.2f..%.2f]\n", a, b, median(rs), slices.Min(rs), slices.Max(rs))
	}
	ratio("veer guards", "caddy")
	ratio("veer guards", "go-reverseproxy")
	ratio("veer bare", "go-reverseproxy")
	ratio("veer bare", "haproxy")
	ratio("veer bare", "nginx")
	fmt.Println()
}

// idleRow opens n keep-alive connections, one request each, and reads the
// contender's RSS while they stay idle.
func idleRow(c gw.Contender, baddr string, n int, wait, wait2 time.Duration) error {
	dir, err := os.MkdirTemp("", "gatewaybench-idle-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	plain, tlsPort := gw.FreePort(), gw.FreePort()
	cmd, err := c.Start(dir, baddr, plain, tlsPort)
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	addr := fmt.Sprintf("127.0.0.1:%d", plain)
	if err := gw.WaitReady(func() error { return get(gw.Client("h1", 1), "http://"+addr+"/") }); err != nil {
		return err
	}
	before := gw.RSSBytes(cmd.Process.Pid)
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	buf := make([]byte, 4096)
	for range n {
		cn, err := net.Dial("tcp", addr)
		if err != nil {
			return fmt.Errorf("after %d connections: %w", len(conns), err)
		}
		conns = append(conns, cn)
		if _, err := io.WriteString(cn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return err
		}
		_ = cn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := cn.Read(buf); err != nil {
			return fmt.Errorf("connection %d: %w", len(conns), err)
		}
	}
	time.Sleep(wait) // the connections stay idle this long before RSS is read
	after := gw.RSSBytes(cmd.Process.Pid)
	fmt.Printf("- %d idle keep-alive connections (one request each), RSS after %s idle: %s %.1f MiB (%.1f MiB before them)\n", n, wait, c.Name, float64(after)/(1<<20), float64(before)/(1<<20))
	if wait2 > wait {
		time.Sleep(wait2 - wait) // still idle; then read RSS again
		fmt.Printf("- %d idle keep-alive connections (one request each), RSS after %s idle: %s %.1f MiB\n", n, wait2, c.Name, float64(gw.RSSBytes(cmd.Process.Pid))/(1<<20))
	}
	return nil
}

func get(cl *http.Client, u string) error {
	resp, err := cl.Get(u)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 200 {
		return errors.New(resp.Status)
	}
	return nil
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
