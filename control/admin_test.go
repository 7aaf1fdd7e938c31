package control_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/control"
	"github.com/veerhq/veer/store"
)

func sum(tok string) string { s := sha256.Sum256([]byte(tok)); return hex.EncodeToString(s[:]) }

func TestAdminRolesAndLimits(t *testing.T) {
	e := start(t, control.Config{Tokens: []control.Token{
		{Name: "vera", Role: "viewer", SHA256: sum("viewer-token-0123456789")},
		{Name: "otto", Role: "operator", SHA256: sum("operator-token-0123456789")},
	}}, control.Options{})
	tb, _ := json.Marshal(table())
	viewer, operator := "viewer-token-0123456789", "operator-token-0123456789"
	cases := []struct {
		name, method, path, token string
		body                      []byte
		code                      int
	}{
		{"no token", "GET", "/v1/admin/docs", "", nil, 401},
		{"wrong token", "GET", "/v1/admin/docs", "nope-nope-nope-nope", nil, 401},
		{"viewer reads", "GET", "/v1/admin/docs", viewer, nil, 200},
		{"viewer cannot write", "PUT", "/v1/admin/docs/routing/table", viewer, tb, 403},
		{"operator cannot write the table", "PUT", "/v1/admin/docs/routing/table", operator, tb, 403},
		{"admin writes the table", "PUT", "/v1/admin/docs/routing/table", e.token, tb, 200},
		{"operator writes state", "PUT", "/v1/admin/docs/routing/state", operator, []byte(`{"sites_down":["a"]}`), 200},
		{"unknown site in state", "PUT", "/v1/admin/docs/routing/state", operator, []byte(`{"sites_down":["zz"]}`), 400},
		{"operator cannot delete", "DELETE", "/v1/admin/docs/routing/state", operator, nil, 403},
		{"body over 1 MiB", "PUT", "/v1/admin/docs/routing/table", e.token, make([]byte, control.MaxAdminBody+1), 413},
		{"unknown document", "PUT", "/v1/admin/docs/other/thing", e.token, []byte(`{}`), 400},
		{"operator playbook", "POST", "/v1/admin/playbook", operator, []byte(`{"action":"site_up","site":"a","reason":"back"}`), 200},
		{"viewer playbook", "POST", "/v1/admin/playbook", viewer, []byte(`{"action":"site_up","site":"a"}`), 403},
		{"bad playbook", "POST", "/v1/admin/playbook", operator, []byte(`{"action":"nuke"}`), 400},
	}
	for _, c := range cases {
		r := e.admin(c.method, c.path, c.token, c.body)
		if r.code != c.code {
			t.Errorf("%s: %d %s, want %d", c.name, r.code, r.body, c.code)
		}
	}
	if r := e.admin("GET", "/v1/admin/whoami", operator, nil); !strings.Contains(r.body, `"otto"`) {
		t.Fatalf("whoami: %s", r.body)
	}
}

func TestAdminInvalidTableNamesFieldAndLineAndKeepsOld(t *testing.T) {
	e := start(t, control.Config{}, control.Options{})
	v := e.put(control.KeyTable, table())
	snap := e.waitVersion(v)
	bad := "default_domain: wap.example.com\nsites:\n  - name: a\n    clusters:\n      - {name: a1, domain: \"bad domain\"}\n"
	r := e.admin("PUT", "/v1/admin/docs/routing/table", e.token, []byte(bad))
	if r.code != 400 || !strings.Contains(r.body, "routing/table:5: sites[0].clusters[0].domain") {
		t.Fatalf("invalid table: %d %s", r.code, r.body)
	}
	if got := e.svc.Snapshot(); got != snap {
		t.Fatal("snapshot replaced by an invalid table")
	}
	d, err := e.svc.Store().Get(t.Context(), control.KeyTable)
	if err != nil || d.Version != 1 {
		t.Fatalf("stored table: %+v %v", d, err)
	}
}

func TestAdminIfMatchAuditRollback(t *testing.T) {
	e := start(t, control.Config{}, control.Options{})
	e.put(control.KeyTable, table())
	t2 := table()
	t2.TTLSeconds = 900
	b2, _ := json.Marshal(t2)
	if r := e.admin("PUT", "/v1/admin/docs/routing/table", e.token, b2, "If-Match", `"7"`); r.code != 409 {
		t.Fatalf("stale If-Match: %d %s", r.code, r.body)
	}
	if r := e.admin("PUT", "/v1/admin/docs/routing/table", e.token, b2, "If-Match", "bogus"); r.code != 400 {
		t.Fatalf("bad If-Match: %d", r.code)
	}
	r := e.admin("PUT", "/v1/admin/docs/routing/table", e.token, b2, "If-Match", `"1"`, "X-Veer-Reason", "longer ttl")
	if r.code != 200 || r.hdr.Get("ETag") != `"2"` {
		t.Fatalf("PUT with If-Match 1: %d %s %v", r.code, r.body, r.hdr)
	}
	if g := e.admin("GET", "/v1/admin/docs/routing/table", e.token, nil); g.hdr.Get("ETag") != `"2"` || !strings.Contains(g.body, "900") {
		t.Fatalf("GET: %v %s", g.hdr, g.body)
	}
	r = e.admin("POST", "/v1/admin/rollback/routing/table", e.token, []byte(`{"version":1,"reason":"ttl too long"}`))
	if r.code != 200 || !strings.Contains(r.body, `"version": 3`) {
		t.Fatalf("rollback: %d %s", r.code, r.body)
	}
	var hist []struct {
		Version int64
		Author  string
		Reason  string
		Before  map[string]any
		After   map[string]any
	}
	h := e.admin("GET", "/v1/admin/history/routing/table", e.token, nil)
	if err := json.Unmarshal([]byte(h.body), &hist); err != nil || len(hist) != 3 {
		t.Fatalf("history: %s %v", h.body, err)
	}
	if hist[0].Version != 3 || hist[0].Author != "admin" || !strings.Contains(hist[0].Reason, "rollback to version 1: ttl too long") ||
		hist[0].Before["ttl_seconds"] != 900.0 || hist[0].After["ttl_seconds"] != 600.0 || hist[1].Reason != "longer ttl" {
		t.Fatalf("audit entries: %+v", hist)
	}
	if r := e.admin("POST", "/v1/admin/rollback/routing/table", e.token, []byte(`{"version":9}`)); r.code != 404 {
		t.Fatalf("rollback to a missing version: %d", r.code)
	}
	a := e.admin("GET", "/v1/admin/audit?limit=2", e.token, nil)
	if err := json.Unmarshal([]byte(a.body), &hist); err != nil || len(hist) != 2 {
		t.Fatalf("audit: %s", a.body)
	}
}

func TestDryRunWhoMoves(t *testing.T) {
	e := start(t, control.Config{}, control.Options{})
	e.waitVersion(e.put(control.KeyTable, table()))
	t20 := table()
	t20.Rules[1].Bucket.To = 20
	b, _ := json.Marshal(t20)
	r := e.admin("PUT", "/v1/admin/docs/routing/table?dry_run=true&sample=100000", e.token, b)
	var rep control.MoveReport
	if err := json.Unmarshal([]byte(r.body), &rep); err != nil || r.code != 200 {
		t.Fatalf("dry run: %d %s", r.code, r.body)
	}
	// The bucket rule is not region-scoped: 10 % of every device moves to
	// site b, from whatever served it before, and nobody else.
	if rep.Sample != 100000 || rep.Share < 9.5 || rep.Share > 10.5 {
		t.Fatalf("report %+v", rep)
	}
	for mv := range rep.Moves {
		if !strings.HasSuffix(mv, "-> b1.example.com") {
			t.Fatalf("unexpected move %s", mv)
		}
	}
	if d, _ := e.svc.Store().Get(t.Context(), control.KeyTable); d.Version != 1 {
		t.Fatal("dry run wrote the table")
	}
	// Emergency preview: everyone moves off a.
	r = e.admin("PUT", "/v1/admin/docs/routing/emergency?dry_run=1&sample=1000", e.token, []byte(`{"global":{"primary":"sorry.example.com"}}`))
	json.Unmarshal([]byte(r.body), &rep)
	if rep.Share != 100 {
		t.Fatalf("global override preview: %+v", rep)
	}
}

func TestPlaybooksMoveAnswers(t *testing.T) {
	e := start(t, control.Config{}, control.Options{})
	e.waitVersion(e.put(control.KeyTable, table()))
	local := netip.MustParseAddr("127.0.0.1")
	plain := ""
	for i := 0; ; i++ { // a device not in the 10 % bucket
		plain = fmt.Sprint("dev-", i)
		if e.svc.Snapshot().Decide(local, plain, "").Rule == "region:local" {
			break
		}
	}
	steps := []struct {
		playbook string
		primary  string
	}{
		{`{"action":"site_down","site":"a","reason":"dc fire"}`, "b1.example.com"},
		{`{"action":"site_up","site":"a"}`, "a"},
		{`{"action":"cluster_down","site":"a","cluster":"a1"}`, "a2.example.com"},
		{`{"action":"cluster_down","site":"a","cluster":"a2"}`, "b1.example.com"},
		{`{"action":"emergency_set","override":{"primary":"sorry.example.com"}}`, "sorry.example.com"},
		{`{"action":"emergency_clear"}`, "b1.example.com"},
		{`{"action":"emergency_set","region":"local","override":{"site":"b"}}`, "b1.example.com"},
	}
	for _, st := range steps {
		r := e.admin("POST", "/v1/admin/playbook", e.token, []byte(st.playbook))
		if r.code != 200 {
			t.Fatalf("%s: %d %s", st.playbook, r.code, r.body)
		}
		var d struct{ Revision int64 }
		json.Unmarshal([]byte(r.body), &d)
		got := e.waitVersion(d.Revision).Decide(local, plain, "")
		if !strings.HasPrefix(got.Primary, st.primary) {
			t.Fatalf("after %s: %+v, want %s", st.playbook, got, st.primary)
		}
	}
}

func TestZeroConfigAndCorruptStore(t *testing.T) {
	dir := t.TempDir()
	svc, err := control.New(control.Config{DataDir: dir}, control.Options{})
	if err != nil {
		t.Fatal(err)
	}
	path, created := svc.AdminTokenFile()
	fi, err := os.Stat(path)
	if err != nil || !created || fi.Mode().Perm() != 0o600 {
		t.Fatalf("admin token %s: %v created %v mode %v", path, err, created, fi.Mode())
	}
	svc.Close()
	svc, err = control.New(control.Config{DataDir: dir}, control.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, created := svc.AdminTokenFile(); created {
		t.Fatal("admin token regenerated on the second start")
	}
	svc.Close()
	if err := os.WriteFile(filepath.Join(dir, "store.db"), []byte(strings.Repeat("garbage!", 1024)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = control.New(control.Config{DataDir: dir}, control.Options{})
	if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), "store.db") {
		t.Fatalf("corrupt store: %v, want ErrCorrupt naming the file", err)
	}
}

func TestConfigValidateNamesFieldAndLine(t *testing.T) {
	cases := map[string]string{
		"listen: nope\n":     "x.yaml:1: listen:",
		"cert_file: a.crt\n": "x.yaml:1: cert_file:",
		"tokens:\n  - {name: n, role: root, sha256: " + sum("x") + "}\n": "x.yaml:2: tokens[0].role:",
		"trusted_proxies: [10.0.0.0/99]\n":                               "x.yaml:1: trusted_proxies[0]:",
		"etcd:\n  endpoints: [127.0.0.1:2379]\n":                         "x.yaml:2: etcd.endpoints[0]:",
		"listen: 127.0.0.1:1\nbogus: 1\n":                                "bogus",
	}
	for in, want := range cases {
		var c control.Config
		err := config.Parse([]byte(in), "x.yaml", &c)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", in, err, want)
		}
	}
}
