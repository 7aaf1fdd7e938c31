package test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestGatewayInteropSlowHTTP attacks the gateway with slowhttptest
// (Debian's): slow headers (slowloris) and slow bodies (R-U-Dead-Yet), 100
// connections each, trickling a few bytes a second. The gateway must cut
// them at read_header_timeout and read_timeout, and slowhttptest's probe,
// a normal request sent every second during the attack, must be answered
// throughout.
func TestGatewayInteropSlowHTTP(t *testing.T) {
	bin := tool(t, "slowhttptest", "slowhttptest")
	be := hashBackend(t)
	g := interopGateway(t, `
listen: {read_header_timeout: 1s, read_timeout: 2s}
routes: [{name: r, clusters: [{name: c}]}]
clusters: [{name: c, backends: [{address: '`+be+`'}]}]
`)
	for _, mode := range []string{"-H", "-B"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			prefix := filepath.Join(t.TempDir(), "report")
			out := run(t, 60*time.Second, bin, mode, "-c", "100", "-r", "100", "-i", "1", "-x", "8", "-s", "100000",
				"-l", "5", "-p", "2", "-g", "-o", prefix, "-u", "http://"+g.Addrs().Plain+"/slow")
			csv, err := os.ReadFile(prefix + ".csv")
			if err != nil {
				t.Fatal(err)
			}
			out = ansi.ReplaceAllString(out, "")
			t.Logf("slowhttptest %s: %s\n%s", mode, lastLines(out, 5), csv)
			// The tool stops early when the server has closed every
			// connection; otherwise it reports "Hit test time limit".
			if !strings.Contains(out, "Exit status: No open connections left") {
				t.Errorf("slowhttptest %s: the gateway did not close every slow connection within 5 s:\n%s", mode, lastLines(out, 12))
			}
			// Seconds,Closed,Pending,Connected,Service Available: the last
			// column is 0 in a second when the probe went unanswered.
			rows := strings.Split(strings.TrimSpace(string(csv)), "\n")
			if len(rows) < 2 {
				t.Fatalf("slowhttptest %s: empty report:\n%s", mode, csv)
			}
			for _, row := range rows[1:] {
				if f := strings.Split(row, ","); len(f) != 5 || f[4] == "0" {
					t.Errorf("slowhttptest %s: service unavailable (probe unanswered in 2 s) at second %s: %s", mode, f[0], row)
				}
			}
		})
	}
}

// ansi matches the terminal colour codes slowhttptest writes.
var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}
