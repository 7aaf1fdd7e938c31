// Package etcdtest starts a real etcd server (Debian's etcd-server package,
// installed by scripts/test-deps.sh) on random loopback ports in a temp
// directory, for tests and benchmarks. It fails, never skips, when etcd is
// missing.
package etcdtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Server is one running etcd.
type Server struct {
	// URL is the client URL, http://127.0.0.1:port.
	URL  string
	dir  string
	log  *os.File
	cmd  *exec.Cmd
	args []string
}

// Start starts etcd with its data in dir and waits until it answers.
func Start(dir string) (*Server, error) {
	bin, err := exec.LookPath("etcd")
	if err != nil {
		return nil, fmt.Errorf("etcdtest: etcd not found (run scripts/test-deps.sh, Debian package etcd-server): %w", err)
	}
	cp, err := freePort()
	if err != nil {
		return nil, err
	}
	pp, err := freePort()
	if err != nil {
		return nil, err
	}
	curl := fmt.Sprintf("http://127.0.0.1:%d", cp)
	purl := fmt.Sprintf("http://127.0.0.1:%d", pp)
	s := &Server{URL: curl, dir: dir, args: []string{bin,
		"--name", "veer", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", curl, "--advertise-client-urls", curl,
		"--listen-peer-urls", purl, "--initial-advertise-peer-urls", purl,
		"--initial-cluster", "veer=" + purl, "--log-level", "error"}}
	if err := s.start(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Server) start() error {
	lf, err := os.OpenFile(filepath.Join(s.dir, "etcd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	s.log = lf
	s.cmd = &exec.Cmd{Path: s.args[0], Args: s.args, Stdout: lf, Stderr: lf,
		SysProcAttr: dieWithParent()}
	if err := s.cmd.Start(); err != nil {
		lf.Close()
		return fmt.Errorf("etcdtest: start etcd: %w", err)
	}
	if err := s.wait(); err != nil {
		s.Kill()
		log, _ := os.ReadFile(filepath.Join(s.dir, "etcd.log"))
		return fmt.Errorf("etcdtest: etcd did not become ready: %w\n%s", err, log)
	}
	return nil
}

// wait blocks until etcd answers a read (the client retries internally).
func (s *Server) wait() error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{s.URL}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = cli.Get(ctx, "health", clientv3.WithSerializable())
	return err
}

// Kill stops etcd at once (SIGKILL), keeping its data.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.log.Close()
	s.cmd = nil
}

// Restart starts etcd again on the same ports and data.
func (s *Server) Restart() error {
	s.Kill()
	return s.start()
}

// Client returns a client of this server.
func (s *Server) Client() (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: []string{s.URL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
}

// New starts etcd for a test and stops it at the end; it fails the test if
// etcd cannot start.
func New(t testing.TB) *Server {
	t.Helper()
	s, err := Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	return s
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
