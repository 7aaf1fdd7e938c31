package control_test

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/control"
	"github.com/veerhq/veer/routing"
)

// TestAdminBearerScheme: the scheme is case-insensitive (RFC 9110 §11.1),
// one or more spaces follow it; anything else is 401.
func TestAdminBearerScheme(t *testing.T) {
	e := start(t, control.Config{}, control.Options{})
	for _, c := range []struct {
		auth string
		code int
	}{
		{"Bearer " + e.token, 200},
		{"bearer " + e.token, 200},
		{"BEARER " + e.token, 200},
		{"bEaReR   " + e.token, 200},
		{"Basic " + e.token, 401},
		{"Bearer", 401},
		{"Bearer ", 401},
		{"Bearer" + e.token, 401},
		{"Bearer x" + e.token, 401},
		{e.token, 401},
	} {
		if r := e.admin("GET", "/v1/admin/whoami", "", nil, "Authorization", c.auth); r.code != c.code {
			t.Errorf("Authorization %.12q...: %d %s, want %d", c.auth, r.code, r.body, c.code)
		}
	}
}

// TestAdminConditionalWrites walks If-Match and If-None-Match (RFC 9110
// §13.1) over one document: * on a missing document is 412 and creates
// nothing; If-None-Match: * creates once, then 412; a stale version is 409.
func TestAdminConditionalWrites(t *testing.T) {
	e := start(t, control.Config{}, control.Options{})
	const path = "/v1/admin/docs/routing/emergency"
	body := []byte(`{"global": {"primary": "sorry.example.com"}}`)
	steps := []struct {
		name, method string
		hdr          []string
		code         int
		version      int64 // the document's version after the step (0: absent)
	}{
		{"If-Match * on a missing document", "PUT", []string{"If-Match", "*"}, 412, 0},
		{"DELETE If-Match * on a missing document", "DELETE", []string{"If-Match", "*"}, 412, 0},
		{"If-None-Match * creates", "PUT", []string{"If-None-Match", "*"}, 200, 1},
		{"If-None-Match * on an existing document", "PUT", []string{"If-None-Match", "*"}, 412, 1},
		{"If-Match * on an existing document", "PUT", []string{"If-Match", "*"}, 200, 2},
		{"If-Match the version read", "PUT", []string{"If-Match", `"2"`}, 200, 3},
		{"If-Match a stale version", "PUT", []string{"If-Match", `"2"`}, 409, 3},
		{"both headers", "PUT", []string{"If-Match", "*", "If-None-Match", "*"}, 400, 3},
		{"If-None-Match a version", "PUT", []string{"If-None-Match", `"3"`}, 400, 3},
		{"DELETE If-None-Match * on an existing document", "DELETE", []string{"If-None-Match", "*"}, 412, 3},
		{"DELETE If-Match *", "DELETE", []string{"If-Match", "*"}, 204, 0},
		{"If-None-Match * re-creates", "PUT", []string{"If-None-Match", "*"}, 200, 5},
	}
	for _, st := range steps {
		b := body
		if st.method == "DELETE" {
			b = nil
		}
		r := e.admin(st.method, path, e.token, b, st.hdr...)
		if r.code != st.code {
			t.Fatalf("%s: %d %s, want %d", st.name, r.code, r.body, st.code)
		}
		g := e.admin("GET", path, e.token, nil)
		switch {
		case st.version == 0 && g.code != 404:
			t.Fatalf("%s: document exists (%d %s), want none", st.name, g.code, g.hdr.Get("ETag"))
		case st.version > 0 && g.hdr.Get("ETag") != `"`+itoa(st.version)+`"`:
			t.Fatalf("%s: ETag %s, want version %d", st.name, g.hdr.Get("ETag"), st.version)
		}
	}
}

func itoa(v int64) string { b, _ := json.Marshal(v); return string(b) }

// TestAdminDocumentErrorsInHouseForm: decoding errors read
// "key:line: field: problem" whether the body is YAML or JSON, and never
// call a JSON body "yaml".
func TestAdminDocumentErrorsInHouseForm(t *testing.T) {
	e := start(t, control.Config{}, control.Options{})
	cases := []struct {
		name, body, want string
	}{
		{"YAML unknown field", "default_domain: wap.example.com\nsites:\n  - name: a\n    clusterz: []\n",
			"routing/table:4: sites[0].clusterz: unknown field"},
		{"JSON unknown field", `{"default_domain": "wap.example.com", "regionz": []}`,
			"routing/table:1: regionz: unknown field"},
		{"JSON unknown field, second line", "{\"default_domain\": \"wap.example.com\",\n \"sites\": [{\"name\": \"a\", \"sibling\": \"b\", \"x\": 1}]}",
			"routing/table:2: sites[0].x: unknown field"},
		{"YAML wrong type", "default_domain: wap.example.com\nttl_seconds: soon\n",
			`routing/table:2: ttl_seconds: want an integer, got \"soon\"`},
		{"JSON wrong type", `{"default_domain": "wap.example.com", "regions": {"east": 1}}`,
			"routing/table:1: regions: want a list, got !!map"},
		{"YAML duplicate key", "default_domain: a.example.com\ndefault_domain: b.example.com\n",
			"routing/table:2: default_domain: written twice (first at line 1)"},
		{"YAML syntax", "default_domain: wap.example.com\nsites: [{name: a\n",
			"routing/table:1: did not find expected ',' or '}'"}, // the decoder's line
		{"JSON syntax", `{"default_domain": "wap.example.com",`,
			"routing/table:1: did not find expected node content"},
	}
	for _, c := range cases {
		r := e.admin("PUT", "/v1/admin/docs/routing/table", e.token, []byte(c.body))
		if r.code != 400 || !strings.Contains(r.body, c.want) {
			t.Errorf("%s: %d %s\nwant 400 with %q", c.name, r.code, r.body, c.want)
		}
		if strings.Contains(strings.ToLower(r.body), "yaml") || strings.Contains(r.body, "unmarshal") {
			t.Errorf("%s: %s names the decoder", c.name, r.body)
		}
	}
}

// TestAdminRoleNeededIsTheOneNeeded: a refused write names the role that
// the document needs, not the lowest writing role.
func TestAdminRoleNeededIsTheOneNeeded(t *testing.T) {
	e := start(t, control.Config{Tokens: []control.Token{
		{Name: "vera", Role: "viewer", SHA256: sum("viewer-token-0123456789")},
		{Name: "otto", Role: "operator", SHA256: sum("operator-token-0123456789")},
	}}, control.Options{})
	tb, _ := json.Marshal(table())
	viewer, operator := "viewer-token-0123456789", "operator-token-0123456789"
	cases := []struct {
		name, method, path, token, want string
	}{
		{"viewer puts the table", "PUT", "/v1/admin/docs/routing/table", viewer, `admin role needed, token \"vera\" is viewer`},
		{"operator puts the table", "PUT", "/v1/admin/docs/routing/table", operator, `admin role needed, token \"otto\" is operator`},
		{"viewer puts the state", "PUT", "/v1/admin/docs/routing/state", viewer, `operator role needed, token \"vera\" is viewer`},
		{"viewer rolls back the table", "POST", "/v1/admin/rollback/routing/table", viewer, "admin role needed"},
		{"operator deletes", "DELETE", "/v1/admin/docs/routing/state", operator, "admin role needed"},
		{"viewer runs a playbook", "POST", "/v1/admin/playbook", viewer, "operator role needed"},
	}
	for _, c := range cases {
		r := e.admin(c.method, c.path, c.token, tb)
		if r.code != 403 || !strings.Contains(r.body, c.want) {
			t.Errorf("%s: %d %s, want 403 with %q", c.name, r.code, r.body, c.want)
		}
	}
}

// TestAdminUnknownDocumentListsEveryDocument: the list names every key the
// API serves, the private DNS's dns/zones (Options.Documents) included.
func TestAdminUnknownDocumentListsEveryDocument(t *testing.T) {
	e := start(t, control.Config{}, control.Options{Documents: map[string]func([]byte) error{
		"dns/zones": func([]byte) error { return nil },
	}})
	r := e.admin("PUT", "/v1/admin/docs/other/thing", e.token, []byte(`{}`))
	var msg struct{ Error string }
	if r.code != 400 || json.Unmarshal([]byte(r.body), &msg) != nil {
		t.Fatalf("unknown document: %d %s", r.code, r.body)
	}
	for _, k := range append(append([]string{}, control.Documents...), "dns/zones", control.KeyWhitelists+"<name>") {
		if !strings.Contains(msg.Error, k) {
			t.Errorf("unknown document: %s does not list %s", msg.Error, k)
		}
	}
	if got := e.svc.DocumentKeys(); !strings.Contains(strings.Join(got, " "), "dns/zones") {
		t.Errorf("DocumentKeys() = %v", got)
	}
}

func TestParsePreconditions(t *testing.T) {
	cases := []struct {
		ifMatch, ifNone string
		want            control.Precondition
		ok              bool
	}{
		{"", "", control.Precondition{}, true},
		{"*", "", control.Precondition{Exists: true}, true},
		{" * ", "", control.Precondition{Exists: true}, true},
		{"", "*", control.Precondition{Absent: true}, true},
		{`"4"`, "", control.Precondition{Version: 4}, true},
		{`W/"4"`, "", control.Precondition{Version: 4}, true},
		{"4", "", control.Precondition{Version: 4}, true},
		{"*", "*", control.Precondition{}, false},
		{`"4"`, "*", control.Precondition{}, false},
		{"", `"4"`, control.Precondition{}, false},
		{"x", "", control.Precondition{}, false},
		{"0", "", control.Precondition{}, false},
	}
	for _, c := range cases {
		got, err := control.ParsePreconditions(c.ifMatch, c.ifNone)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParsePreconditions(%q, %q) = %+v, %v; want %+v ok=%v", c.ifMatch, c.ifNone, got, err, c.want, c.ok)
		}
	}
}

// TestDocumentErrorForms: a document's decoding errors, YAML or JSON, read
// "key:line: field: problem" (config.Parse's form); a new yaml version that
// words them differently fails here.
func TestDocumentErrorForms(t *testing.T) {
	cases := []struct{ body, want string }{
		{"sites:\n  - name: a\n    clusters: [{name: c, domian: x}]\n", "routing/table:3: sites[0].clusters[0].domian: unknown field"},
		{"ttl_seconds: [1]\n", "routing/table:1: ttl_seconds: want an integer, got !!seq"},
		{"salt: x\nttl_seconds: 12345678901234567890123\n", `routing/table:2: ttl_seconds: want an integer, got "12345678901234567890123"`},
		{"a: b: c\n", "routing/table: mapping values are not allowed in this context"}, // no line from the decoder
		{"a: [b\n", "routing/table:1: did not find expected ',' or ']'"},
		{"regions:\n- {name: e, cidrs: [10.0.0.0/8]}\n- name: f\n  name: g\n", "routing/table:4: regions[1].name: written twice (first at line 3)"},
		{"[1, 2]\n", "routing/table:1: want a value of type control.Table, got !!seq"},
		{"default_domain: x\n---\ndefault_domain: y\n", "routing/table: more than one YAML document"},
	}
	for _, c := range cases {
		_, got := control.ValidateDocument(control.KeyTable, []byte(c.body))
		if got == nil || got.Error() != c.want {
			t.Errorf("%q: %v\nwant %s", c.body, got, c.want)
		}
	}
}

// TestRouteAnswerBoundToDeviceAndTime: POST /v1/route signs issued_at (the
// service's clock), expires_at (ttl_seconds later) and the device ID's
// SHA-256; the body verifies for that device only and until it expires.
func TestRouteAnswerBoundToDeviceAndTime(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC))
	e := start(t, control.Config{}, control.Options{Clock: clk})
	e.waitVersion(e.put(control.KeyTable, table()))
	keys := []ed25519.PublicKey{e.svc.PublicKey()}
	post := func(device string) []byte {
		r, err := http.Post("http://"+e.addrs.Plain+"/v1/route", "application/json", strings.NewReader(`{"device_id":"`+device+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		if r.StatusCode != 200 {
			t.Fatalf("%d %s", r.StatusCode, b)
		}
		return b
	}
	body := post("vip-1")
	a, err := routing.VerifyFor(body, keys, "vip-1", clk.Now())
	if err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if a.IssuedAt != clk.Now().Unix() || a.ExpiresAt != a.IssuedAt+600 || a.DeviceSHA256 != routing.DeviceHash("vip-1") || a.Primary != "b1.example.com" {
		t.Fatalf("answer %+v", a)
	}
	if _, err := routing.VerifyFor(body, keys, "vip-2", clk.Now()); !errors.Is(err, routing.ErrOtherDevice) {
		t.Fatalf("vip-1's answer for vip-2: %v", err)
	}
	if _, err := routing.VerifyFor(body, keys, "vip-1", clk.Now().Add(600*time.Second+routing.MaxClockSkew)); !errors.Is(err, routing.ErrExpired) {
		t.Fatalf("vip-1's answer after expiry: %v", err)
	}
	clk.Advance(time.Minute)
	if a2, err := routing.VerifyFor(post("vip-1"), keys, "vip-1", clk.Now()); err != nil || a2.IssuedAt != a.IssuedAt+60 {
		t.Fatalf("a minute later: %+v %v", a2, err)
	}
}

func TestConfigAdminURLAndTokenFile(t *testing.T) {
	cases := []struct {
		cfg         control.Config
		url, tokens string
	}{
		{control.Config{}, "http://127.0.0.1:7444", "veer-data/admin.token"},
		{control.Config{DataDir: "/var/lib/veer", AdminListen: "10.0.0.1:9000"}, "http://10.0.0.1:9000", "/var/lib/veer/admin.token"},
		{control.Config{AdminListen: "0.0.0.0:7444", AdminTokenFile: "/etc/veer/admin.token"}, "http://127.0.0.1:7444", "/etc/veer/admin.token"},
		{control.Config{AdminListen: ":7000"}, "http://127.0.0.1:7000", "veer-data/admin.token"},
		{control.Config{AdminListen: "[::]:7000"}, "http://[::1]:7000", "veer-data/admin.token"},
		{control.Config{AdminListen: "localhost:7000"}, "http://localhost:7000", "veer-data/admin.token"},
	}
	for _, c := range cases {
		if u, f := c.cfg.AdminURL(), c.cfg.TokenFile(); u != c.url || f != c.tokens {
			t.Errorf("%+v: %s %s, want %s %s", c.cfg, u, f, c.url, c.tokens)
		}
	}
}
