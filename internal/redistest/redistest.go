// Package redistest starts a real redis-server for tests: on a random
// loopback port, in the test's temp dir, without persistence, stopped when
// the test ends. A missing redis-server fails the test with a pointer to
// `make deps` (scripts/test-deps.sh); it never skips.
package redistest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Server is a running redis-server.
type Server struct {
	t    testing.TB
	bin  string
	dir  string
	port int

	mu  sync.Mutex
	cmd *exec.Cmd
}

// Start starts a redis-server and registers its shutdown with t.Cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redistest: redis-server not found in PATH (%v); install it with `make deps` (scripts/test-deps.sh, Debian package redis-server)", err)
	}
	s := &Server{t: t, bin: bin, dir: t.TempDir()}
	var lastErr error
	for range 5 {
		s.port = freePort(t)
		if lastErr = s.start(); lastErr == nil {
			t.Cleanup(s.Kill)
			return s
		}
	}
	t.Fatalf("redistest: could not start redis-server: %v", lastErr)
	return nil
}

// Addr is host:port of the server.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// CPU returns the server's CPU time so far (user + system, from
// /proc/<pid>/stat, 10 ms resolution), for benchmarks that report the
// server's cost per operation.
func (s *Server) CPU() (time.Duration, error) {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil {
		return 0, errors.New("redistest: server not running")
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which is in parentheses: utime and
	// stime are fields 14 and 15 of the line, in USER_HZ (100/s) ticks.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0, errors.New("redistest: unexpected /proc stat")
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}

// Kill stops the server at once (SIGKILL), as a crash would. It is safe to
// call when the server is not running.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT)
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Pause freezes the server (SIGSTOP): connections stay open and nothing
// answers, as with a hung or overloaded Redis. Resume undoes it. Cleanup
// resumes a paused server before killing it.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		s.t.Fatalf("redistest: server not running")
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("redistest: %v: %v", sig, err)
	}
}

// Restart starts the server again on the same port (empty: no persistence).
func (s *Server) Restart() {
	s.t.Helper()
	if err := s.start(); err != nil {
		s.t.Fatalf("redistest: restart: %v", err)
	}
}

// start runs redis-server in the foreground and returns once it logs that
// it accepts connections (no polling).
func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cmd := exec.Command(s.bin,
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--protected-mode", "no",
		"--dir", s.dir, "--save", "", "--appendonly", "no", "--daemonize", "no",
		"--loglevel", "notice", "--logfile", "")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return err
	}
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		var log strings.Builder
		for sc.Scan() {
			line := sc.Text()
			log.WriteString(line + "\n")
			if strings.Contains(line, "Ready to accept connections") {
				ready <- nil
				_, _ = io.Copy(io.Discard, out)
				return
			}
		}
		ready <- fmt.Errorf("redis-server exited before it was ready:\n%s", log.String())
	}()
	timer := time.NewTimer(20 * time.Second)
	defer timer.Stop()
	select {
	case err := <-ready:
		if err != nil {
			_ = cmd.Wait()
			return err
		}
	case <-timer.C:
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("redis-server not ready after 20s")
	}
	s.cmd = cmd
	return nil
}

func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
