package up

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// child is a supervised child process: started with the same binary and a
// subcommand, restarted RestartAfter after it dies (a chaos SIGKILL), and
// stopped with SIGTERM (SIGKILL after stopGrace) when the system stops.
type child struct {
	name    string
	exe     string
	args    []string
	env     []string
	logPath string
	restart time.Duration
	log     *slog.Logger
	onStart func() // the state file follows the pid
	// preStart, when set, runs before each start (async.ephemeral wipes
	// the gateway's queue store).
	preStart func()

	mu       sync.Mutex
	cmd      *exec.Cmd
	pid      int
	starts   int
	stopping bool
	done     chan struct{}
	wake     chan struct{}
}

const stopGrace = 5 * time.Second

var errStopping = errors.New("up: stopping")

// start runs the process once and the supervision loop.
func (c *child) start() error {
	c.done = make(chan struct{})
	c.wake = make(chan struct{})
	exited, err := c.spawn()
	if err != nil {
		close(c.done)
		return err
	}
	go c.supervise(exited)
	return nil
}

func (c *child) spawn() (<-chan error, error) {
	if c.preStart != nil {
		c.preStart()
	}
	logf, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(c.exe, c.args...)
	cmd.Env = append(os.Environ(), c.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = childAttr()
	c.mu.Lock()
	if c.stopping {
		c.mu.Unlock()
		logf.Close()
		return nil, errStopping
	}
	if err := cmd.Start(); err != nil {
		c.mu.Unlock()
		logf.Close()
		return nil, fmt.Errorf("%s: %w", c.name, err)
	}
	c.cmd, c.pid = cmd, cmd.Process.Pid
	c.starts++
	c.mu.Unlock()
	if c.onStart != nil {
		c.onStart()
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); logf.Close() }()
	return exited, nil
}

func (c *child) supervise(exited <-chan error) {
	defer close(c.done)
	for {
		err := <-exited
		c.mu.Lock()
		stopping := c.stopping
		c.pid = 0
		c.mu.Unlock()
		if stopping {
			return
		}
		c.log.Warn("child exited; restarting", "child", c.name, "err", err, "after", c.restart.String())
		t := time.NewTimer(c.restart)
		select {
		case <-t.C:
		case <-c.wake:
			t.Stop()
			return
		}
		for {
			exited, err = c.spawn()
			if err == nil {
				break
			}
			if errors.Is(err, errStopping) {
				return
			}
			c.log.Error("child restart failed", "child", c.name, "err", err)
			t := time.NewTimer(time.Second)
			select {
			case <-t.C:
			case <-c.wake:
				t.Stop()
				return
			}
		}
	}
}

// Pid is the running process's id, 0 while it is down.
func (c *child) Pid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pid
}

// stop ends the process and the supervision: SIGTERM (and SIGCONT, in
// case chaos froze it), SIGKILL after stopGrace; it waits for the exit.
func (c *child) stop() {
	c.mu.Lock()
	if c.stopping {
		c.mu.Unlock()
		<-c.done
		return
	}
	c.stopping = true
	cmd, pid := c.cmd, c.pid
	c.mu.Unlock()
	close(c.wake)
	if cmd != nil && pid != 0 {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Process.Signal(syscall.SIGCONT)
		t := time.NewTimer(stopGrace)
		select {
		case <-c.done:
		case <-t.C:
			_ = cmd.Process.Kill()
		}
		t.Stop()
	}
	<-c.done
}

// waitTCP waits until every addr accepts a TCP connection, the process
// dies, or ctx ends.
func waitTCP(ctx context.Context, addrs ...string) error {
	var d net.Dialer
	for _, a := range addrs {
		for {
			conn, err := d.DialContext(ctx, "tcp", a)
			if err == nil {
				conn.Close()
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("%s never accepted: %w", a, errors.Join(err, ctx.Err()))
			}
			t := time.NewTimer(50 * time.Millisecond)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
	}
	return nil
}
