// Command controlbench measures `veer control` (docs/control.md):
//
//	controlbench -mode load          answers per CPU-second of the server
//	                                 (GOMAXPROCS=1) under hey, against a
//	                                 static handler on the same server stack,
//	                                 rounds interleaved A B A B
//	controlbench -mode propagation   an emergency override written through one
//	                                 of three instances on a real etcd, until
//	                                 every instance's answers and two store
//	                                 watchers (standing in for gateways) have it
//
// The machine is shared: figures are ratios and per-CPU-second rates, with
// the command that produced them.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/veerhq/veer/control"
)

func main() {
	mode := flag.String("mode", "load", "load or propagation")
	rounds := flag.Int("rounds", 5, "load: interleaved rounds")
	n := flag.Int("n", 20000, "load: requests per hey run")
	conc := flag.Int("c", 32, "load: hey connections")
	changes := flag.Int("changes", 100, "propagation: overrides to time")
	flag.Parse()
	var err error
	switch *mode {
	case "load":
		err = load(*rounds, *n, *conc)
	case "propagation":
		err = propagation(*changes)
	default:
		err = fmt.Errorf("unknown -mode %q", *mode)
	}
	if err != nil {
		log.Fatal(err)
	}
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func cpu() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// load runs hey against /v1/route (100 rules, 100 000 whitelist entries)
// and against a static handler that reads the body and writes a fixed
// answer of the same size, on the same kind of server.
func load(rounds, n, c int) error {
	runtime.GOMAXPROCS(1)
	if _, err := exec.LookPath("hey"); err != nil {
		return fmt.Errorf("hey not found: apt-get install -y hey (scripts/test-deps.sh): %w", err)
	}
	dir, err := os.MkdirTemp("", "controlbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	svc, err := control.New(control.Config{DataDir: dir, Listen: "127.0.0.1:0", ListenPlain: "127.0.0.1:0", AdminListen: "127.0.0.1:0"},
		control.Options{Logger: quiet()})
	if err != nil {
		return err
	}
	addrs, err := svc.Start()
	if err != nil {
		return err
	}
	defer svc.Close()
	tok, err := os.ReadFile(filepath.Join(dir, "admin.token"))
	if err != nil {
		return err
	}
	if err := putBigTable("http://"+addrs.Admin, strings.TrimSpace(string(tok))); err != nil {
		return err
	}
	for svc.Snapshot() == nil { // the table is applied asynchronously
		runtime.Gosched()
	}
	fixed := svc.Snapshot().Body(mustAddr("127.0.0.1"), "device-1", "", time.Now()) // the floor: a signed answer written as-is, no per-request signature
	static := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write(fixed)
	})}
	sl, err := listen()
	if err != nil {
		return err
	}
	go static.Serve(sl)
	defer static.Close()
	bodies := map[string]string{"bucket/region": `{"device_id":"device-1","app":"bank","platform":"ios"}`,
		"whitelist": `{"device_id":"wl-42-1999","app":"bank","platform":"ios"}`}
	fmt.Printf("# controlbench -mode load: server GOMAXPROCS=1, hey -n %d -c %d (HTTP/1.1 keep-alive); shared 2-core machine\n", n, c)
	fmt.Println("| round | contender | requests | server CPU | answers per CPU-second | hey req/s |")
	fmt.Println("|---|---|---|---|---|---|")
	res := map[string][]float64{}
	for r := 1; r <= rounds; r++ {
		for _, k := range []string{"veer bucket/region", "static", "veer whitelist"} {
			url, body := "http://"+addrs.Plain+"/v1/route", bodies[strings.TrimPrefix(k, "veer ")]
			if k == "static" {
				url, body = "http://"+sl.Addr().String()+"/v1/route", bodies["bucket/region"]
			}
			before := cpu()
			out, err := exec.Command("hey", "-n", fmt.Sprint(n), "-c", fmt.Sprint(c), "-m", "POST", "-T", "application/json", "-d", body, url).CombinedOutput()
			used := cpu() - before
			if err != nil {
				return fmt.Errorf("hey: %v\n%s", err, out)
			}
			ok := strings.Contains(string(out), fmt.Sprintf("[200]\t%d responses", n))
			if !ok {
				return fmt.Errorf("hey: not all %d answers were 200:\n%s", n, out)
			}
			rate := float64(n) / used.Seconds()
			res[k] = append(res[k], rate)
			fmt.Printf("| %d | %s | %d | %.2f s | %.0f | %s |\n", r, k, n, used.Seconds(), rate, heyRPS(string(out)))
		}
	}
	med := func(xs []float64) float64 { s := slices.Clone(xs); slices.Sort(s); return s[len(s)/2] }
	ratio := func(k string) []float64 {
		var out []float64
		for i := range res[k] {
			out = append(out, res[k][i]/res["static"][i])
		}
		return out
	}
	rb, rw := ratio("veer bucket/region"), ratio("veer whitelist")
	fmt.Printf("\nmedian answers per CPU-second: veer bucket/region %.0f, veer whitelist %.0f, static %.0f\n",
		med(res["veer bucket/region"]), med(res["veer whitelist"]), med(res["static"]))
	fmt.Printf("per-round ratio to static (same round): bucket/region %.2f (%.2f-%.2f), whitelist %.2f (%.2f-%.2f)\n",
		med(rb), slices.Min(rb), slices.Max(rb), med(rw), slices.Min(rw), slices.Max(rw))
	return nil
}

func heyRPS(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "Requests/sec:" {
			return f[1]
		}
	}
	return "?"
}
