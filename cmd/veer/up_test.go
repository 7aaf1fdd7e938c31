package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/veerhq/veer/store/storeetcd/etcdtest"
	"github.com/veerhq/veer/up"
)

// upChild runs the test binary as `veer up ARGS` (TestMain turns it into
// veer when envChild is set; the children it starts inherit that).
func upChild(t *testing.T, tmp string, args ...string) (*exec.Cmd, <-chan string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"up"}, args...)...)
	cmd.Env = append(os.Environ(), envChild+"=1", "TMPDIR="+tmp)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 4096)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	return cmd, lines
}

// waitLine returns the first line matching re, failing after d.
func waitLine(t *testing.T, lines <-chan string, re *regexp.Regexp, d time.Duration) []string {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("veer up exited before printing %v", re)
			}
			if m := re.FindStringSubmatch(l); m != nil {
				return m
			}
		case <-deadline.C:
			t.Fatalf("no line matching %v within %v", re, d)
		}
	}
}

// `veer up` as a process: steady traffic within 10 s of start; SIGINT
// stops it with no child process, open port or temporary directory left.
func TestUpServesThenStopsCleanlyOnSIGINT(t *testing.T) {
	tmp := t.TempDir()
	start := time.Now()
	cmd, lines := upChild(t, tmp, "--devices", "6", "--every", "1s")
	m := waitLine(t, lines, regexp.MustCompile(`^veer up: started in .*; data (\S+) \(state (\S+)\)`), 30*time.Second)
	dataDir, statePath := m[1], m[2]
	if !strings.HasPrefix(dataDir, tmp) {
		t.Fatalf("data dir %s not under TMPDIR %s", dataDir, tmp)
	}
	// a frame whose interval had requests, all of them successful
	waitLine(t, lines, regexp.MustCompile(`^veer up .* devices 6 +[1-9][0-9]* req/s +success 100\.00%`), 10*time.Second-time.Since(start)+2*time.Second)
	if d := time.Since(start); d > 12*time.Second { // 10 s plus the test binary's start
		t.Fatalf("steady traffic %v after start", d)
	}
	raw, err := os.ReadFile(statePath)
	if err != nil {
		t.Fatal(err)
	}
	var st up.State
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	var pids []int
	addrs := []string{st.API, st.Control, st.Admin, st.DNS}
	for _, p := range st.Gateways {
		pids = append(pids, p.Pid)
		addrs = append(addrs, append(p.Addrs, p.Admin)...)
	}
	for _, p := range st.Backends {
		pids = append(pids, p.Pid)
		addrs = append(addrs, p.Addrs...)
	}
	if len(pids) != 5 {
		t.Fatalf("state names %d child processes, want 5 (2 gateways, 3 clusters): %+v", len(pids), st)
	}
	for _, pid := range pids {
		if pid <= 0 || syscall.Kill(pid, 0) != nil {
			t.Fatalf("child pid %d not running", pid)
		}
	}
	if _, err := os.Stat(filepath.Join(tmp, "veer-up.current")); err != nil {
		t.Fatalf("no pointer file for veer chaos: %v", err)
	}

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("veer up exited with %v after SIGINT", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("veer up still running 30 s after SIGINT")
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("child pid %d still exists after veer up stopped (kill 0: %v)", pid, err)
		}
	}
	for _, a := range addrs {
		if c, err := net.DialTimeout("tcp", a, time.Second); err == nil {
			c.Close()
			t.Errorf("%s still accepts after veer up stopped", a)
		}
	}
	if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary data dir %s left behind (%v)", dataDir, err)
	}
	if _, err := os.Stat(filepath.Join(tmp, "veer-up.current")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pointer file left behind (%v)", err)
	}
}

// startSystem runs a veer up in this process whose children are this
// test binary acting as veer.
func startSystem(t *testing.T, cfg up.Config) *up.System {
	t.Helper()
	return startSystemWith(t, cfg, up.Options{})
}

// startSystemWith is startSystem with options (the children are still
// this test binary).
func startSystemWith(t *testing.T, cfg up.Config, opts up.Options) *up.System {
	t.Helper()
	opts.Exe, opts.ChildEnv = os.Args[0], []string{envChild + "=1"}
	sys, err := up.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := sys.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sys.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return sys
}

var testChaos = up.ChaosConfig{Window: 3 * time.Second, Detect: 30 * time.Second, Recover: 45 * time.Second}

// Every fault scenario end to end against a real veer up: each PASSes. The
// overload scenario is a capacity measurement, not a fault: under -race
// beside the other packages' tests on two cores its generator and the
// gateway cannot hold 6x a backend's capacity (a fresh-clone make test read
// 32.87 % of critical requests served while a soak ran beside it), so its
// PASS is measured by `veer chaos run overload` (docs/chaos.md) and this
// test runs it only for its FAIL with shedding off, below.
func TestChaosScenariosPass(t *testing.T) {
	sys := startSystem(t, up.Config{Devices: 12, RestartAfter: 6 * time.Second})
	c := up.NewChaos(sys.State().API, testChaos, testWriter{t})
	for _, sc := range up.Scenarios() {
		if sc.Name == "overload" || releaseScenario[sc.Name] {
			continue
		}
		r := c.Run(t.Context(), sc)
		t.Log(r.String())
		if !r.Pass {
			t.Errorf("%s: FAIL with its protection on", sc.Name)
		}
	}
}

// Each scenario FAILs when the protection it checks is switched off
// (failover off for the gateway faults, cross-cluster retry off for the
// cluster kill, the last mile's hijack check and serve-stale off for the
// DNS outage, failover off for the site down, the gateway's shedding off for
// the overload, a queue store that does not survive the gateway's restart
// for the async kill), so that its PASS means something.
func TestChaosScenariosFailWithProtectionOff(t *testing.T) {
	sys := startSystem(t, up.Config{Devices: 12, RestartAfter: 6 * time.Second,
		Failover: up.FailoverConfig{Disabled: true}, Gateway: up.GatewayConfig{RetryDisabled: true, ShedDisabled: true},
		LastMile: up.LastMileConfig{Unprotected: true}, Async: up.AsyncConfig{Ephemeral: true}})
	cc := testChaos
	cc.WarmUp = time.Second // no retry budget to fill: retries are off
	c := up.NewChaos(sys.State().API, cc, testWriter{t})
	for _, sc := range up.Scenarios() {
		if releaseScenario[sc.Name] {
			continue
		}
		r := c.Run(t.Context(), sc)
		t.Log(r.String())
		if r.Pass || r.LatencyOnly {
			t.Errorf("%s: PASS with its protection off (latency only: %v)", sc.Name, r.LatencyOnly)
		}
		if r.Err != "" {
			t.Errorf("%s: did not judge: %s", sc.Name, r.Err)
		}
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// releaseScenario: the scenarios that need the control store on etcd,
// which TestChaosReleaseScenarios plays (the others' systems run the
// embedded store, where they are skipped).
var releaseScenario = map[string]bool{"bad-release": true, "good-release": true}

// The release scenarios against a veer up whose control plane runs on a
// real etcd (the gateways follow release documents only from etcd): a bad
// B is aborted and a healthy one promoted; with the judge off (each
// rollout paused at once) both FAIL.
func TestChaosReleaseScenarios(t *testing.T) {
	etcd := etcdtest.New(t)
	sys := startSystemWith(t, up.Config{Devices: 4, RestartAfter: 6 * time.Second, Store: "etcd://" + strings.TrimPrefix(etcd.URL, "http://")}, up.Options{})
	cc := testChaos
	cc.WarmUp = 2 * time.Second // no retry budget at stake here
	for _, off := range []bool{false, true} {
		cc.ReleaseJudgeOff = off
		if off {
			cc.Detect = 6 * time.Second // nothing will abort: the bound the FAIL is judged on
		}
		c := up.NewChaos(sys.State().API, cc, testWriter{t})
		for _, name := range []string{"bad-release", "good-release"} {
			sc, _ := up.Lookup(name)
			r := c.Run(t.Context(), sc)
			t.Log(r.String())
			if r.Err != "" {
				t.Errorf("%s (judge off %v): did not judge: %s", name, off, r.Err)
			}
			if r.Pass == off {
				t.Errorf("%s: pass %v with the judge off %v", name, r.Pass, off)
			}
		}
	}
}

// `veer up --nats local`: veer up runs Debian's nats-server as a child,
// both gateways' async routes run on it (the steady submitter's
// invocations succeed at both sites), and SIGINT leaves no nats-server.
func TestUpNATSLocal(t *testing.T) {
	tmp := t.TempDir()
	cmd, lines := upChild(t, tmp, "--devices", "2", "--every", "1s", "--nats", "local")
	m := waitLine(t, lines, regexp.MustCompile(`^veer up: nats-server nats://127\.0\.0\.1:\d+ \(pid (\d+), store (\S+)\)`), 30*time.Second)
	pid, err := strconv.Atoi(m[1])
	if err != nil || pid <= 0 || syscall.Kill(pid, 0) != nil {
		t.Fatalf("nats-server pid %q not running (%v)", m[1], err)
	}
	waitLine(t, lines, regexp.MustCompile(`^  async: +a submitted \d+, 202 \d+, succeeded [1-9]\d*.* b submitted \d+, 202 \d+, succeeded [1-9]`), 30*time.Second)
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("veer up exited with %v after SIGINT", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("veer up still running 30 s after SIGINT")
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("nats-server pid %d still exists after veer up stopped (kill 0: %v)", pid, err)
	}
}
