// Package natstest starts a real nats-server -js process (Debian's
// nats-server) on a loopback port with its store in a directory, for tests
// of the external engine path: kill it with SIGKILL, restart it on the same
// port and store.
//
// Failure mode: a missing nats-server binary fails the test with a message
// naming scripts/test-deps.sh; it never skips.
package natstest

import (
	"bufio"
	"io"
	"os/exec"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// Server is one nats-server process.
type Server struct {
	t    testing.TB
	dir  string
	Port int
	cmd  *exec.Cmd
	done chan struct{}
}

// URL of the server.
func (s *Server) URL() string { return "nats://127.0.0.1:" + strconv.Itoa(s.Port) }

var listening = regexp.MustCompile(`Listening for client connections on 127\.0\.0\.1:(\d+)`)

// Start runs nats-server -js with its store in dir on a random loopback
// port; the test's cleanup kills it.
func Start(t testing.TB, dir string) *Server {
	t.Helper()
	s := &Server{t: t, dir: dir, Port: -1}
	s.start()
	t.Cleanup(s.Kill)
	return s
}

func (s *Server) start() {
	s.t.Helper()
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		s.t.Fatalf("nats-server not found (%v): run scripts/test-deps.sh (Debian package nats-server)", err)
	}
	cmd := exec.Command(bin, "-js", "-sd", s.dir, "-a", "127.0.0.1", "-p", strconv.Itoa(s.Port))
	out, err := cmd.StderrPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("starting nats-server: %v", err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	port := make(chan int, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				p, _ := strconv.Atoi(m[1])
				port <- p
				break
			}
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
		close(s.done)
	}()
	select {
	case p := <-port:
		s.Port = p
	case <-s.done:
		s.t.Fatalf("nats-server exited before listening (store %s)", s.dir)
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		s.t.Fatal("nats-server did not listen within 30s")
	}
}

// Kill sends SIGKILL and waits for the process to end.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
	s.cmd = nil
}

// Restart starts the server again on the same port and store.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	s.start()
}
