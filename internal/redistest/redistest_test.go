package redistest

import (
	"bufio"
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestStartKillRestart(t *testing.T) {
	s := Start(t)
	ping := func() error {
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			return err
		}
		defer c.Close()
		if _, err := c.Write([]byte("PING\r\n")); err != nil {
			return err
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		if err == nil && line != "+PONG\r\n" {
			t.Fatalf("PING answered %q", line)
		}
		return err
	}
	if err := ping(); err != nil {
		t.Fatal(err)
	}
	s.Pause()
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("PING\r\n"))
	c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := bufio.NewReader(c).ReadString('\n'); err == nil {
		t.Fatal("paused server answered")
	}
	c.Close()
	s.Resume()
	if err := ping(); err != nil {
		t.Fatalf("after Resume: %v", err)
	}
	s.Kill()
	if err := ping(); err == nil {
		t.Fatal("server answers after Kill")
	}
	s.Restart()
	if err := ping(); err != nil {
		t.Fatalf("after Restart: %v", err)
	}
}

// fatalTB records Fatalf instead of failing the real test.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestMissingServerFailsWithPointer(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no redis-server here
	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Start(f)
	}()
	<-done
	if !strings.Contains(f.msg, "make deps") || !strings.Contains(f.msg, "scripts/test-deps.sh") {
		t.Fatalf("message %q should point at make deps and scripts/test-deps.sh", f.msg)
	}
}

func TestCPU(t *testing.T) {
	s := Start(t)
	if d, err := s.CPU(); err != nil || d < 0 {
		t.Fatalf("CPU of a running server: %v, %v", d, err)
	}
	s.Kill()
	if _, err := s.CPU(); err == nil {
		t.Fatal("CPU of a killed server: no error")
	}
}
