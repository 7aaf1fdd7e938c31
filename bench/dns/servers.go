package dns

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	mdns "github.com/miekg/dns"
)

// Server is a DNS server process started for the benchmark.
type Server struct {
	Name string
	Addr string // ip:port
	cmd  *exec.Cmd
	done chan error
}

// Pid is the server's process id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Stop ends the process and waits for it.
func (s *Server) Stop() {
	s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
}

// Prefix, if set, runs each server under it (e.g. taskset -c 1).
type Prefix []string

func (p Prefix) command(name string, args ...string) *exec.Cmd {
	all := append(append([]string{}, p...), name)
	all = append(all, args...)
	return exec.Command(all[0], all[1:]...)
}

func start(name string, cmd *exec.Cmd, addr string, logf string) (*Server, error) {
	lf, err := os.Create(logf)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	s := &Server{Name: name, Addr: addr, cmd: cmd, done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait(); lf.Close() }()
	if err := waitReady(addr, s.done); err != nil {
		s.Stop()
		log, _ := os.ReadFile(logf)
		return nil, fmt.Errorf("%s did not answer on %s: %w\n%s", name, addr, err, log)
	}
	return s, nil
}

// waitReady asks for the SOA until the server answers it, at most 20 s.
func waitReady(addr string, exited chan error) error {
	q := new(mdns.Msg)
	q.SetQuestion(Origin, mdns.TypeSOA)
	c := &mdns.Client{Timeout: 200 * time.Millisecond}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			exited <- err
			return fmt.Errorf("exited: %v", err)
		default:
		}
		if r, _, err := c.Exchange(q, addr); err == nil && r.Rcode == mdns.RcodeSuccess && len(r.Answer) == 1 {
			return nil
		}
		time.Sleep(50 * time.Millisecond) // a process starting up: nothing to wait on but the port
	}
	return errors.New("timeout")
}

// FreeAddr returns a loopback address whose port is free for UDP and TCP.
func FreeAddr() (string, error) {
	for range 20 {
		u, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		addr := u.LocalAddr().String()
		t, err := net.Listen("tcp", addr)
		u.Close()
		if err == nil {
			t.Close()
			return addr, nil
		}
	}
	return "", errors.New("no free port")
}

// StartVeer runs `veer dns` (the binary at bin) with GOMAXPROCS procs.
func StartVeer(bin, dir string, z Zone, procs int, p Prefix) (*Server, error) {
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "veer.yaml")
	if err := os.WriteFile(conf, []byte(z.VeerConfig(addr)), 0o644); err != nil {
		return nil, err
	}
	cmd := p.command(bin, "dns", "--config", conf, "--log-level", "error")
	cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(procs))
	return start("veer", cmd, addr, filepath.Join(dir, "veer.log"))
}

// StartNSD runs NSD with servers worker processes.
func StartNSD(dir string, z Zone, servers int, p Prefix) (*Server, error) {
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	host, port, _ := net.SplitHostPort(addr)
	d := filepath.Join(dir, "nsd")
	if err := os.MkdirAll(d, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(d, "bench.test.zone"), []byte(z.ZoneFile()), 0o644); err != nil {
		return nil, err
	}
	conf := fmt.Sprintf(`server:
  ip-address: %s@%s
  port: %s
  server-count: %d
  username: ""
  chroot: ""
  zonesdir: "%s"
  database: ""
  zonelistfile: "%s/zone.list"
  xfrdfile: "%s/xfrd.state"
  xfrdir: "%s"
  pidfile: "%s/nsd.pid"
  logfile: "%s/nsd.log"
  verbosity: 0
  hide-version: yes
  rrl-ratelimit: 0
  rrl-whitelist-ratelimit: 0
remote-control:
  control-enable: no
zone:
  name: bench.test
  zonefile: bench.test.zone
`, host, port, port, servers, d, d, d, d, d, d)
	cf := filepath.Join(d, "nsd.conf")
	if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	nsd, err := exec.LookPath("nsd")
	if err != nil {
		return nil, errors.New("nsd not found: run scripts/test-deps.sh (Debian package nsd)")
	}
	return start("nsd", p.command(nsd, "-d", "-c", cf), addr, filepath.Join(d, "stdout.log"))
}

// StartKnot runs Knot DNS with workers UDP workers.
func StartKnot(dir string, z Zone, workers int, p Prefix) (*Server, error) {
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	host, port, _ := net.SplitHostPort(addr)
	d := filepath.Join(dir, "knot")
	if err := os.MkdirAll(d, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(d, "bench.test.zone"), []byte(z.ZoneFile()), 0o644); err != nil {
		return nil, err
	}
	conf := fmt.Sprintf(`server:
    listen: %s@%s
    rundir: "%s"
    udp-workers: %d
    tcp-workers: 1
    background-workers: 1
control:
    listen: "%s/knot.sock"
database:
    storage: "%s"
log:
  - target: stderr
    any: error
zone:
  - domain: bench.test
    file: "%s/bench.test.zone"
    zonefile-sync: -1
    journal-content: none
`, host, port, d, workers, d, d, d)
	cf := filepath.Join(d, "knot.conf")
	if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	knotd, err := exec.LookPath("knotd")
	if err != nil {
		return nil, errors.New("knotd not found: run scripts/test-deps.sh (Debian package knot)")
	}
	return start("knot", p.command(knotd, "-c", cf), addr, filepath.Join(d, "stdout.log"))
}

// CPU returns the user+system CPU time that the process pid and its
// descendants (NSD forks its servers) used so far, from /proc.
func CPU(pid int) (time.Duration, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	parent := map[int]int{}
	ticks := map[int]int64{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		pp, t, err := procStat(p)
		if err != nil {
			continue // gone meanwhile
		}
		parent[p], ticks[p] = pp, t
	}
	if _, ok := ticks[pid]; !ok {
		return 0, fmt.Errorf("process %d not found", pid)
	}
	var sum int64
	for p, t := range ticks {
		for q := p; q > 1; q = parent[q] {
			if q == pid {
				sum += t
				break
			}
		}
	}
	const clkTck = 100 // USER_HZ on Linux
	return time.Duration(sum) * time.Second / clkTck, nil
}

// procStat returns the parent pid and utime+stime ticks of pid.
func procStat(pid int) (int, int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')') // the command name may hold spaces
	if i < 0 {
		return 0, 0, errors.New("bad /proc stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, 0, errors.New("bad /proc stat")
	}
	pp, _ := strconv.Atoi(f[1])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return pp, ut + st, nil
}

func splitHostPort(addr string) (string, string, error) { return net.SplitHostPort(addr) }
