package up

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestNFTRules(t *testing.T) {
	got, err := nftRules("veer_chaos_7_1", []string{"127.0.0.2:8443", "[::1]:53"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"table inet veer_chaos_7_1 {",
		"type filter hook output priority 0; policy accept;",
		"ip daddr 127.0.0.2 tcp dport 8443 drop",
		"ip saddr 127.0.0.2 tcp sport 8443 drop",
		"ip daddr 127.0.0.2 udp dport 8443 drop",
		"ip saddr 127.0.0.2 udp sport 8443 drop",
		"ip6 daddr ::1 tcp dport 53 drop",
		"ip6 saddr ::1 udp sport 53 drop",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("rules lack %q:\n%s", want, got)
		}
	}
	for _, bad := range [][]string{nil, {"127.0.0.2"}, {"gw.example:443"}, {"127.0.0.2:0"}, {"127.0.0.2:70000"}, {"127.0.0.2:443; flush ruleset"}} {
		if _, err := nftRules("t", bad); err == nil {
			t.Errorf("nftRules(%q): no error", bad)
		}
	}
}

func TestCheckBlackhole(t *testing.T) {
	for _, m := range []string{"", "auto", "nft", "sigstop"} {
		if err := CheckBlackhole(m); err != nil {
			t.Errorf("%q: %v", m, err)
		}
	}
	if err := CheckBlackhole("iptables"); err == nil || !strings.Contains(err.Error(), `"iptables"`) {
		t.Errorf("iptables: %v", err)
	}
}

func TestStaleTables(t *testing.T) {
	self := os.Getpid()
	list := strings.Join([]string{
		"table inet filter",
		"table inet veer_chaos_100_1", // dead
		"table inet veer_chaos_200_3", // alive
		"table inet veer_chaos_" + strconv.Itoa(self) + "_1",
		"table ip veer_chaos_100_2", // not ours: another family
		"table inet veer_chaos_x_1",
		"table inet veer_chaos_100_2", // dead
		"",
	}, "\n")
	got := staleTables(list, func(pid int) bool { return pid == 200 })
	if strings.Join(got, ",") != "veer_chaos_100_1,veer_chaos_100_2" {
		t.Errorf("stale = %q", got)
	}
}

func FuzzStaleTables(f *testing.F) {
	f.Add("table inet veer_chaos_100_1\ntable inet filter\n")
	f.Fuzz(func(t *testing.T, list string) {
		for _, s := range staleTables(list, func(int) bool { return false }) {
			if !strings.HasPrefix(s, nftTablePrefix) || !strings.Contains(list, s) {
				t.Fatalf("%q picked from %q", s, list)
			}
		}
	})
}

// TestNFTBlackholeDropsPackets: with the table in place a connection to
// the listener times out (dropped, not refused) and a datagram to it is
// not delivered; after undo both work again and no table is left.
func TestNFTBlackholeDropsPackets(t *testing.T) {
	if _, err := exec.LookPath("nft"); err != nil {
		t.Fatal("no nft command: make deps (scripts/test-deps.sh) installs nftables")
	}
	if os.Geteuid() != 0 {
		t.Skip("nftables needs root (CAP_NET_ADMIN); veer chaos falls back to SIGSTOP then")
	}
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	pc, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.2", strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("UDP twin of %d: %v", port, err)
	}
	defer pc.Close()
	addr := ln.Addr().String()

	ctx := context.Background()
	undo, err := nftBlackhole(ctx, []string{addr})
	if err != nil {
		if strings.Contains(err.Error(), "Operation not permitted") {
			t.Skipf("no CAP_NET_ADMIN here: %v", err)
		}
		t.Fatal(err)
	}
	defer undo() //nolint:errcheck // also on a failure

	c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond)
	if err == nil {
		c.Close()
		t.Fatal("dialled through the blackhole")
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("dial error %v, want a timeout (dropped, not refused)", err)
	}
	if n := udpDelivered(t, pc, addr); n != 0 {
		t.Fatalf("%d datagrams through the blackhole", n)
	}

	if err := undo(); err != nil {
		t.Fatal(err)
	}
	c, err = net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatalf("after undo: %v", err)
	}
	c.Close()
	if n := udpDelivered(t, pc, addr); n == 0 {
		t.Fatal("no datagram after undo")
	}
	out, err := exec.Command("nft", "list", "tables", "inet").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), nftTablePrefix+strconv.Itoa(os.Getpid())+"_") {
		t.Fatalf("table left after undo:\n%s", out)
	}
}

// udpDelivered sends a datagram to addr and says whether pc got it within
// 300 ms (1) or not (0).
func udpDelivered(t *testing.T, pc net.PacketConn, addr string) int {
	t.Helper()
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("x")); err != nil {
		return 0 // the drop on the output hook may refuse the send (EPERM)
	}
	pc.SetReadDeadline(time.Now().Add(300 * time.Millisecond)) //nolint:errcheck // a deadline on a live socket
	buf := make([]byte, 8)
	if _, _, err := pc.ReadFrom(buf); err != nil {
		return 0
	}
	return 1
}
