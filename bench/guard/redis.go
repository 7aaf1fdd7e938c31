package guard

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Redis is a redis-server started for a benchmark run.
type Redis struct {
	Addr string
	cmd  *exec.Cmd
	dir  string
}

// StartRedis starts redis-server on a free loopback port in a temp dir;
// with cpu != "" it runs under `taskset -c cpu`, pinned to those cores.
func StartRedis(cpu string) (*Redis, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not found (install with `make deps`): %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir, err := os.MkdirTemp("", "guardbench-redis")
	if err != nil {
		return nil, err
	}
	args := []string{bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", ""}
	if cpu != "" {
		ts, err := exec.LookPath("taskset")
		if err != nil {
			return nil, fmt.Errorf("taskset not found (Debian package util-linux): %w", err)
		}
		args = append([]string{ts, "-c", cpu}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "Ready to accept connections") {
			go func() {
				for sc.Scan() {
				}
			}()
			return &Redis{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, dir: dir}, nil
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	return nil, errors.New("redis-server exited before it was ready")
}

// Stop kills the server and removes its directory.
func (r *Redis) Stop() {
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	os.RemoveAll(r.dir)
}

// CPU returns the server's CPU time so far (user + system), from
// /proc/<pid>/stat (taskset execs redis-server in the same process).
func (r *Redis) CPU() (time.Duration, error) {
	return procCPU(r.cmd.Process.Pid)
}

// SelfCPU returns this process's CPU time so far (user + system).
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// clkTck is USER_HZ, the unit of /proc/<pid>/stat's times (100 on Linux).
const clkTck = 100

func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// Fields after the command name (which is in parentheses and may hold
	// spaces): state is field 3, utime 14, stime 15.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("bad /proc stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, errors.New("bad /proc stat")
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(ut+st) * time.Second / clkTck, nil
}
