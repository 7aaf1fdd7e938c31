package control_test

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/veerhq/veer/control"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
		goleak.IgnoreTopFunction("google.golang.org/grpc/internal/transport.(*controlBuffer).get"),
		goleak.IgnoreAnyFunction("net/http.(*conn).closeWriteAndWait"), // a 413 connection lingers 500 ms after the server closed
	)
}

type applied struct {
	rev  int64
	snap *control.Snapshot
}

// env is one running control instance on loopback.
type env struct {
	t     *testing.T
	svc   *control.Service
	addrs control.Addrs
	token string
	snaps chan applied
	dir   string
}

func start(t *testing.T, cfg control.Config, opts control.Options) *env {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	cfg.Listen, cfg.ListenPlain, cfg.AdminListen = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	svc, err := control.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, svc: svc, snaps: make(chan applied, 1000), dir: cfg.DataDir}
	svc.SetOnApply(func(rev int64, s *control.Snapshot) { e.snaps <- applied{rev, s} })
	e.addrs, err = svc.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	path, _ := svc.AdminTokenFile()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	e.token = strings.TrimSpace(string(raw))
	return e
}

// waitVersion waits for a snapshot at revision >= v.
func (e *env) waitVersion(v int64) *control.Snapshot {
	e.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case a := <-e.snaps:
			if a.rev >= v {
				return a.snap
			}
		case <-timeout:
			e.t.Fatalf("no snapshot at version %d within 10s", v)
		}
	}
}

type resp struct {
	code int
	body string
	hdr  http.Header
}

// admin calls the admin API.
func (e *env) admin(method, path, token string, body []byte, hdr ...string) resp {
	e.t.Helper()
	req, err := http.NewRequest(method, "http://"+e.addrs.Admin+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return resp{r.StatusCode, string(b), r.Header}
}

// put writes a document as admin and waits until this instance applied it.
func (e *env) put(key string, v any) int64 {
	e.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		e.t.Fatal(err)
	}
	r := e.admin("PUT", "/v1/admin/docs/"+key, e.token, b, "X-Veer-Reason", "test")
	if r.code != 200 {
		e.t.Fatalf("PUT %s: %d %s", key, r.code, r.body)
	}
	var d struct{ Revision int64 }
	json.Unmarshal([]byte(r.body), &d)
	return d.Revision
}

func table() *control.Table {
	return &control.Table{
		DefaultDomain: "wap.example.com", Salt: "s", TTLSeconds: 600,
		Regions: []control.Region{{Name: "local", CIDRs: []string{"127.0.0.0/8", "::1/128"}, Site: "a"}},
		Sites: []control.Site{
			{Name: "a", Sibling: "b", Clusters: []control.Cluster{{Name: "a1", Domain: "a1.example.com"}, {Name: "a2", Domain: "a2.example.com"}}},
			{Name: "b", Sibling: "a", Clusters: []control.Cluster{{Name: "b1", Domain: "b1.example.com"}}},
		},
		Rules: []control.Rule{
			{Name: "vip", DeviceIDs: []string{"vip-1"}, Site: "b"},
			{Name: "shift", Bucket: &control.Bucket{From: 0, To: 10}, Site: "b"},
		},
	}
}

func insecureTLS() *tls.Config { return &tls.Config{InsecureSkipVerify: true} } // self-signed test certificate
