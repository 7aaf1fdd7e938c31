package up

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Blackhole mechanisms of the primary-blackhole scenario
// (ChaosConfig.Blackhole).
const (
	// BlackholeAuto drops packets with nftables when it can (root and the
	// nft command), else freezes the gateway with SIGSTOP.
	BlackholeAuto = "auto"
	// BlackholeNFT drops every packet to and from the gateway's listeners
	// in a table of its own on the output hook: SYNs go unanswered, data
	// on open connections vanishes, as on a dead path.
	BlackholeNFT = "nft"
	// BlackholeSIGSTOP freezes the gateway process: handshakes complete
	// in the kernel's backlog, no byte comes back.
	BlackholeSIGSTOP = "sigstop"
)

// nftTablePrefix names the tables the scenario adds; the chaos process's
// pid and a sequence number follow (veer_chaos_PID_N), so a table left by
// a chaos process that died mid-fault is known as stale and removed by the
// next one (clearStaleBlackholes).
const nftTablePrefix = "veer_chaos_"

var nftTables atomic.Int64 // the N of this process's tables

// CheckBlackhole refuses a ChaosConfig.Blackhole that names no mechanism ("" is auto).
func CheckBlackhole(m string) error {
	switch m {
	case "", BlackholeAuto, BlackholeNFT, BlackholeSIGSTOP:
		return nil
	}
	return fmt.Errorf("blackhole: %q is not one of auto, nft, sigstop", m)
}

// nftRules is the nft script of a table that drops every TCP and UDP
// packet to and from addrs (host:port) on this host's output hook, which
// loopback traffic crosses in both directions.
func nftRules(table string, addrs []string) (string, error) {
	if len(addrs) == 0 {
		return "", errors.New("blackhole: no address to drop")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "table inet %s {\n\tchain out {\n\t\ttype filter hook output priority 0; policy accept;\n", table)
	for _, a := range addrs {
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			return "", fmt.Errorf("blackhole: %q: %w", a, err)
		}
		ip := net.ParseIP(host)
		p, err := strconv.ParseUint(port, 10, 16)
		if ip == nil || err != nil || p == 0 {
			return "", fmt.Errorf("blackhole: %q is not an IP address and port", a)
		}
		family := "ip6"
		if ip.To4() != nil {
			family = "ip"
		}
		for _, proto := range []string{"tcp", "udp"} {
			fmt.Fprintf(&b, "\t\t%s daddr %s %s dport %d drop\n", family, ip, proto, p)
			fmt.Fprintf(&b, "\t\t%s saddr %s %s sport %d drop\n", family, ip, proto, p)
		}
	}
	b.WriteString("\t}\n}\n")
	return b.String(), nil
}

// nftBlackhole drops every packet to and from addrs until undo. It fails
// (and changes nothing) without root or the nft command; the caller falls
// back to another mechanism and says which one it used.
func nftBlackhole(ctx context.Context, addrs []string) (undo func() error, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("nftables needs root")
	}
	nft, err := exec.LookPath("nft")
	if err != nil {
		return nil, errors.New("no nft command (Debian: apt-get install nftables)")
	}
	clearStaleBlackholes(ctx, nft)
	table := fmt.Sprintf("%s%d_%d", nftTablePrefix, os.Getpid(), nftTables.Add(1))
	script, err := nftRules(table, addrs)
	if err != nil {
		return nil, err
	}
	if err := runNFT(ctx, nft, script, "-f", "-"); err != nil {
		return nil, err
	}
	return func() error {
		// not ctx: the undo also runs when the scenario was cancelled
		uctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return runNFT(uctx, nft, "", "delete", "table", "inet", table)
	}, nil
}

// clearStaleBlackholes deletes the tables of chaos processes that are gone
// (killed mid-fault, their undo never ran), so that a site is not left
// blackholed for good.
func clearStaleBlackholes(ctx context.Context, nft string) {
	out, err := exec.CommandContext(ctx, nft, "list", "tables", "inet").Output()
	if err != nil {
		return
	}
	for _, table := range staleTables(string(out), func(pid int) bool {
		err := syscall.Kill(pid, 0)
		return err == nil || errors.Is(err, syscall.EPERM)
	}) {
		_ = runNFT(ctx, nft, "", "delete", "table", "inet", table)
	}
}

// staleTables picks from `nft list tables inet` the chaos tables whose
// process is not alive.
func staleTables(list string, alive func(pid int) bool) []string {
	var stale []string
	for _, line := range strings.Split(list, "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != "table" || f[1] != "inet" || !strings.HasPrefix(f[2], nftTablePrefix) {
			continue
		}
		p, _, _ := strings.Cut(strings.TrimPrefix(f[2], nftTablePrefix), "_")
		pid, err := strconv.Atoi(p)
		if err != nil || pid <= 0 || pid == os.Getpid() || alive(pid) {
			continue
		}
		stale = append(stale, f[2])
	}
	return stale
}

func runNFT(ctx context.Context, nft, stdin string, args ...string) error {
	cmd := exec.CommandContext(ctx, nft, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("nft %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
