package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	bench "github.com/veerhq/veer/bench/shed"
)

// The server processes: start, stop with their CPU time, the capacity run,
// and CPU time read from /proc while they run.

// niceness is the scheduling priority of the server process (a negative
// value needs root). It does not help against other cgroups, which share the
// CPU by weight whatever the nice value.
var niceness = flag.Int("nice", 0, "nice value of the server process (0: leave it)")

// server is a running server process.
type server struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *bufio.Scanner
	addr   string
	start  time.Time
	pinned bool
}

func startServer(contender string, h bench.HandlerConfig, tracePath string) (*server, error) {
	return startServerBin("", contender, h, tracePath)
}

// startServerBin starts the server process of the shedbench binary bin
// ("": this one).
func startServerBin(bin, contender string, h bench.HandlerConfig, tracePath string) (*server, error) {
	self := bin
	if self == "" {
		var err error
		if self, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	args := []string{"serve", "-contender", contender, "-kind", h.Kind, "-iters", strconv.Itoa(h.Iters),
		"-slots", strconv.Itoa(h.Slots), "-sleep", h.Sleep.String(), "-paths", strings.Join(h.Paths, ","), "-trace", tracePath}
	args = append(args, profileArgs()...)
	argv := append([]string{self}, args...)
	pinned := false
	if ts, err := exec.LookPath("taskset"); err == nil {
		argv = append([]string{ts, "-c", "0"}, argv...)
		pinned = true
	}
	if *niceness != 0 {
		if n, err := exec.LookPath("nice"); err == nil {
			argv = append([]string{n, "-n", strconv.Itoa(*niceness)}, argv...)
		}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout), start: time.Now(), pinned: pinned}
	if !s.out.Scan() || !strings.HasPrefix(s.out.Text(), "ADDR ") {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("server %s did not start: %q", contender, s.out.Text())
	}
	s.addr = strings.TrimPrefix(s.out.Text(), "ADDR ")
	return s, nil
}

// stop ends the server and returns its CPU time, wall time and requests.
func (s *server) stop() (cpu, wall time.Duration, served int64, err error) {
	s.stdin.Close()
	for s.out.Scan() {
		if v, ok := strings.CutPrefix(s.out.Text(), "SERVED "); ok {
			served, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	if err := s.cmd.Wait(); err != nil {
		return 0, 0, 0, err
	}
	wall = time.Since(s.start)
	if ru, ok := s.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return cpu, wall, served, nil
}

// capacity measures the cpu handler's throughput with no protection:
// closed loop, 32 workers, 2 s after a 300 ms warm-up. perCPU is the
// requests served per second of the server's CPU time: on a shared machine
// the server gets a varying share of its core, and goodput per CPU second
// over perCPU is a figure that share moves much less.
func capacity(client *http.Client, iters int) (rps, perCPU float64, err error) {
	s, err := startServer("none", bench.HandlerConfig{Kind: "cpu", Iters: iters, Paths: []string{"GET /a"}}, "")
	if err != nil {
		return 0, 0, err
	}
	stopped := false
	defer func() {
		if !stopped {
			s.stop()
		}
	}()
	var n atomic.Int64
	var measuring atomic.Bool
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for ctx.Err() == nil {
				resp, err := client.Get("http://" + s.addr + "/a")
				if err != nil {
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if measuring.Load() {
					n.Add(1)
				}
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	measuring.Store(true)
	time.Sleep(2 * time.Second)
	measuring.Store(false)
	cancel()
	wg.Wait()
	stopped = true
	cpu, _, served, err := s.stop()
	if err != nil {
		return 0, 0, err
	}
	if cpu > 0 {
		perCPU = float64(served) / cpu.Seconds()
	}
	return float64(n.Load()) / 2, perCPU, nil
}

// procCPU is the CPU time (user + system) of process pid so far, from
// /proc (10 ms resolution); false where there is no /proc.
func procCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// Fields after the command (which may hold spaces) start after ") ".
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64) // field 14, utime
	st, err2 := strconv.ParseInt(f[12], 10, 64) // field 15, stime
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(ut+st) * time.Second / 100, true // USER_HZ is 100 on Linux
}

func raiseNoFile() {
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil {
		rl.Cur = rl.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
	}
}
