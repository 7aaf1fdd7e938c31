package dns

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"time"
)

// Result is one dnsperf run against one server.
type Result struct {
	Server    string
	Sent      int64
	Completed int64
	Lost      int64
	QPS       float64
	// ServerCPU is the CPU time the server used during the run.
	ServerCPU time.Duration
}

// CPUPerQuery is the server's CPU time per completed query.
func (r Result) CPUPerQuery() time.Duration {
	if r.Completed == 0 {
		return 0
	}
	return r.ServerCPU / time.Duration(r.Completed)
}

var (
	reSent      = regexp.MustCompile(`Queries sent:\s+(\d+)`)
	reCompleted = regexp.MustCompile(`Queries completed:\s+(\d+)`)
	reLost      = regexp.MustCompile(`Queries lost:\s+(\d+)`)
	reQPS       = regexp.MustCompile(`Queries per second:\s+([0-9.]+)`)
)

// ParseDNSPerf reads dnsperf's summary.
func ParseDNSPerf(out string) (Result, error) {
	var r Result
	var err error
	get := func(re *regexp.Regexp) string {
		m := re.FindStringSubmatch(out)
		if m == nil {
			err = errors.Join(err, fmt.Errorf("dnsperf output lacks %q", re.String()))
			return "0"
		}
		return m[1]
	}
	r.Sent, _ = strconv.ParseInt(get(reSent), 10, 64)
	r.Completed, _ = strconv.ParseInt(get(reCompleted), 10, 64)
	r.Lost, _ = strconv.ParseInt(get(reLost), 10, 64)
	r.QPS, _ = strconv.ParseFloat(get(reQPS), 64)
	return r, err
}

// Load is how dnsperf loads a server.
type Load struct {
	Queries     string        // query file
	Duration    time.Duration // -l
	Outstanding int           // -q: queries in flight
	Clients     int           // -c: sockets
	Prefix      Prefix        // e.g. taskset -c 0
}

// Run runs dnsperf against s and measures the server's CPU.
func (l Load) Run(s *Server) (Result, error) {
	perf, err := exec.LookPath("dnsperf")
	if err != nil {
		return Result{}, errors.New("dnsperf not found: run scripts/test-deps.sh (Debian package dnsperf)")
	}
	host, port, err := splitHostPort(s.Addr)
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.Duration+30*time.Second)
	defer cancel()
	args := append(append([]string{}, l.Prefix...), perf, "-s", host, "-p", port, "-d", l.Queries,
		"-l", strconv.Itoa(int(l.Duration.Seconds())), "-q", strconv.Itoa(l.Outstanding), "-c", strconv.Itoa(l.Clients), "-t", "2")
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	before, err := CPU(s.Pid())
	if err != nil {
		return Result{}, err
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return Result{}, fmt.Errorf("dnsperf: %w\n%s", err, out)
	}
	after, err := CPU(s.Pid())
	if err != nil {
		return Result{}, err
	}
	r, err := ParseDNSPerf(string(out))
	r.Server = s.Name
	r.ServerCPU = after - before
	return r, err
}
