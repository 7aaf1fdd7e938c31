package gateway

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/obs"
)

// child is a backend process: the test binary re-executed, so that SIGKILL
// and SIGSTOP hit a real process with real sockets.
type child struct {
	addr string
	cmd  *exec.Cmd
}

func startChild(t *testing.T, addr string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+addr)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "listening ") {
		_ = cmd.Process.Kill()
		t.Fatalf("child: %q %v", line, err)
	}
	c := &child{addr: strings.TrimSpace(strings.TrimPrefix(line, "listening ")), cmd: cmd}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return c
}

func (c *child) signal(t *testing.T, s syscall.Signal) {
	if err := c.cmd.Process.Signal(s); err != nil {
		t.Fatal(err)
	}
	if s == syscall.SIGKILL {
		_ = c.cmd.Wait()
	}
}

// TestClusterKillAndFreeze runs three clusters of two backend processes
// each behind the gateway under steady load; one cluster is killed
// (SIGKILL) and brought back, then another is frozen (SIGSTOP) and thawed.
// At least 99.9% of requests must succeed, with at most 1.2 upstream
// attempts per request, and the killed cluster must take traffic again.
func TestClusterKillAndFreeze(t *testing.T) {
	var kids [3][2]*child
	for i := range kids {
		for j := range kids[i] {
			kids[i][j] = startChild(t, "127.0.0.1:0")
		}
	}
	yaml := `
routes: [{name: r, policy: weighted, try_timeout: 250ms, timeout: 2s, clusters: [{name: c0}, {name: c1}, {name: c2}]}]
retry: {policy: {initial: 1ms, max_wait: 100ms}}
clusters:
`
	for i := range kids {
		yaml += "  - {name: c" + string(rune('0'+i)) + ", return_ramp: 300ms, slow_start: 200ms, health: {path: /, interval: 100ms, timeout: 100ms, rise: 2, fall: 2}, outlier: {consecutive_errors: 2, base_ejection: 400ms}, backends: [{address: '" + kids[i][0].addr + "'}, {address: '" + kids[i][1].addr + "'}]}\n"
	}
	var cfg Config
	if err := config.Parse([]byte(yaml), "fault.yaml", &cfg); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	cfg.Listen.Addr, cfg.Listen.Plain = "off", "127.0.0.1:0"
	g, err := New(cfg, Options{Logger: obs.Discard, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	base := "http://" + g.Addrs().Plain

	var reqs, fails atomic.Int64
	var mu sync.Mutex
	hits := map[string]int{}
	phase := "steady"
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := &http.Client{Timeout: 5 * time.Second}
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := cl.Get(base + "/")
				reqs.Add(1)
				if err != nil {
					fails.Add(1)
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != 200 {
					fails.Add(1)
					continue
				}
				mu.Lock()
				hits[phase+" "+string(b)]++
				mu.Unlock()
			}
		}()
	}
	setPhase := func(p string, d time.Duration) {
		mu.Lock()
		phase = p
		mu.Unlock()
		time.Sleep(d) // the load runs for this long: a phase of the scenario, not a wait for a condition
	}
	setPhase("steady", 400*time.Millisecond)
	for _, k := range kids[0] {
		k.signal(t, syscall.SIGKILL)
	}
	setPhase("killed", time.Second)
	for j, k := range kids[0] { // back on the same ports
		kids[0][j] = startChild(t, k.addr)
	}
	setPhase("restarted", 500*time.Millisecond)
	setPhase("returned", 500*time.Millisecond)
	for _, k := range kids[1] {
		k.signal(t, syscall.SIGSTOP)
	}
	setPhase("frozen", 1500*time.Millisecond)
	for _, k := range kids[1] {
		k.signal(t, syscall.SIGCONT)
	}
	setPhase("thawed", 300*time.Millisecond)
	close(stop)
	wg.Wait()

	n, f := reqs.Load(), fails.Load()
	attempts := sumCounter(t, reg, "veer_gateway_upstream_attempts_total")
	t.Logf("requests %d, failed %d (%.3f%%), upstream attempts %.0f (%.3f per request)", n, f, 100*float64(f)/float64(n), attempts, attempts/float64(n))
	if n < 500 {
		t.Fatalf("only %d requests: the load did not run", n)
	}
	if float64(f) > 0.001*float64(n) {
		t.Errorf("%d of %d requests failed, want ≤ 0.1%%", f, n)
	}
	if attempts > 1.2*float64(n) {
		t.Errorf("%.0f attempts for %d requests, want ≤ 1.2×", attempts, n)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, k := range kids[0] {
		if hits["returned "+k.addr] == 0 {
			t.Errorf("restarted backend %s got no traffic back: %v", k.addr, hits)
		}
	}
}

func sumCounter(t *testing.T, g prometheus.Gatherer, name string) float64 {
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var s float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				s += m.GetCounter().GetValue()
			}
		}
	}
	return s
}

// TestDrainUnderLoad drains a backend, then a whole cluster, while 8
// clients send requests that take a few milliseconds each: no request may
// fail, the drained ones must receive no request sent after the drain, and
// the ones in flight at the drain finish.
//
// Each request carries the phase it was sent in (phaseHeader: 0 before
// any drain, 1 after a1's, 2 after cluster b's), read after the Drain that
// began the phase returned, and the backends count their answers by it: a
// request sent before a drain may reach the drained backend afterwards
// (it was picked before), one sent after it may not, however long either
// takes on a busy machine.
func TestDrainUnderLoad(t *testing.T) {
	const phaseHeader = "X-Test-Phase"
	var mu sync.Mutex
	hits := [3]map[string]int{{}, {}, {}} // by phase, by backend
	slow := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(3 * time.Millisecond) // the request's service time
			p, err := strconv.Atoi(r.Header.Get(phaseHeader))
			if err != nil || p < 0 || p >= len(hits) {
				http.Error(w, "no phase", http.StatusBadRequest)
				return
			}
			mu.Lock()
			hits[p][name]++
			mu.Unlock()
			_, _ = io.WriteString(w, name)
		}
	}
	a1, a2, b1 := upstream(t, slow("a1")), upstream(t, slow("a2")), upstream(t, slow("b1"))
	g, base := startGateway(t, fill(`
routes: [{name: r, policy: weighted, clusters: [{name: a}, {name: b}]}]
retry: {disabled: true}
clusters:
  - {name: a, backends: [{address: A1}, {address: A2}]}
  - {name: b, backends: [{address: B1}]}
`, "A1", a1, "A2", a2, "B1", b1))
	var reqs, fails atomic.Int64
	var phase atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{}
			for {
				select {
				case <-stop:
					return
				default:
				}
				reqs.Add(1)
				req, _ := http.NewRequest(http.MethodGet, base+"/", nil)
				req.Header.Set(phaseHeader, strconv.FormatInt(phase.Load(), 10))
				resp, err := c.Do(req)
				if err != nil {
					fails.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != 200 {
					fails.Add(1)
				}
			}
		}()
	}
	// phaseHits returns the answers to the requests sent in phase p.
	phaseHits := func(p int) map[string]int {
		mu.Lock()
		defer mu.Unlock()
		m := map[string]int{}
		for k, v := range hits[p] {
			m[k] = v
		}
		return m
	}
	// run lets the load run in phase p until at least n requests sent in it
	// were answered (30 s at most: a load that stalls fails the test).
	run := func(p, n int) map[string]int {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; {
			m := phaseHits(p)
			total := 0
			for _, v := range m {
				total += v
			}
			if total >= n {
				return m
			}
			if time.Now().After(deadline) {
				t.Fatalf("phase %d: %d requests answered in 30 s, want %d (fails %d)", p, total, n, fails.Load())
			}
			time.Sleep(time.Millisecond) // polling the answers
		}
	}
	run(0, 50)
	if err := g.Drain("a", a1, true); err != nil {
		t.Fatal(err)
	}
	phase.Store(1)
	run(1, 100)
	if err := g.Drain("b", "", true); err != nil {
		t.Fatal(err)
	}
	phase.Store(2)
	run(2, 100)
	close(stop)
	wg.Wait()
	p1, p2 := phaseHits(1), phaseHits(2)
	t.Logf("requests %d, failed %d; sent before the drains: %v; after draining a1: %v; after draining cluster b too: %v", reqs.Load(), fails.Load(), phaseHits(0), p1, p2)
	if fails.Load() != 0 {
		t.Errorf("%d of %d requests failed during drains", fails.Load(), reqs.Load())
	}
	if p1["a1"] != 0 || p1["a2"] == 0 || p1["b1"] == 0 {
		t.Errorf("sent after draining a1: %v, want none on a1", p1)
	}
	if p2["a1"] != 0 || p2["b1"] != 0 || p2["a2"] == 0 {
		t.Errorf("sent after draining cluster b: %v, want all on a2", p2)
	}
}
