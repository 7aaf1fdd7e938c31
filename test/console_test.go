package test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/veerhq/veer/store/storeetcd/etcdtest"
)

// consoleTable is the routing table the console test starts from: nobody
// in a region, so every device from 127.0.0.1 gets default_site a, unless
// rule "shift" (bucket 0..10 %) sends it to b.
const consoleTable = `{
  "default_domain": "wap.example.com",
  "salt": "console-test",
  "default_site": "a",
  "regions": [{"name": "east", "cidrs": ["10.0.0.0/8"], "site": "a"}, {"name": "west", "cidrs": ["192.0.2.0/24"], "site": "b"}],
  "sites": [
    {"name": "a", "sibling": "b", "clusters": [{"name": "a1", "domain": "a1.example.com"}]},
    {"name": "b", "sibling": "a", "clusters": [{"name": "b1", "domain": "b1.example.com"}]}
  ],
  "rules": [{"name": "shift", "bucket": {"by": "device", "from": 0, "to": 10}, "site": "b"}]
}`

// buildVeer builds the veer binary once per test binary run, in builtDir
// (TestMain removes it).
var buildVeer = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "veer-bin-")
	if err != nil {
		return "", err
	}
	builtDir.Store(&dir)
	bin := filepath.Join(dir, "veer")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/veer")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/veer: %v\n%s", err, out)
	}
	return bin, nil
})

// veerProc is a veer subprocess whose output lines a test can wait for.
type veerProc struct {
	cmd   *exec.Cmd
	lines chan string
	mu    sync.Mutex
	out   bytes.Buffer
}

func startVeer(t *testing.T, args ...string) *veerProc {
	t.Helper()
	bin, err := buildVeer()
	if err != nil {
		t.Fatal(err)
	}
	p := &veerProc{cmd: exec.Command(bin, args...), lines: make(chan string, 1024)}
	pr, pw := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = pw, pw
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-done
		}
		pw.Close()
		if t.Failed() {
			p.mu.Lock()
			t.Logf("%s output:\n%s", args[0], p.out.String())
			p.mu.Unlock()
		}
	})
	return p
}

// await returns the first submatch of re in the process's output.
func (p *veerProc) await(t *testing.T, re string) string {
	t.Helper()
	return p.awaitAll(t, re)[1]
}

// awaitAll returns the submatches of re in the first output line matching.
func (p *veerProc) awaitAll(t *testing.T, re string) []string {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.After(20 * time.Second)
	for {
		select {
		case l := <-p.lines:
			if m := rx.FindStringSubmatch(l); m != nil {
				return m
			}
		case <-deadline:
			t.Fatalf("no line matching %q within 20s", re)
		}
	}
}

// adminCall is one admin API call from the test (not the browser).
func adminCall(t *testing.T, method, url, token, body string, hdr ...string) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// routeAnswer is what POST /v1/route answers device dev-7 now.
func routeAnswer(t *testing.T, plain string) string {
	t.Helper()
	resp, err := http.Post("http://"+plain+"/v1/route", "application/json",
		strings.NewReader(`{"device_id":"dev-7","app":"bank","app_version":"1","platform":"ios"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a struct {
		Answer struct{ Primary string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		t.Fatal(err)
	}
	return a.Answer.Primary
}

// untilTrue polls cond (each call a real request) until it holds, failing
// after a bound: it waits for a state, not for a time.
func untilTrue(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestConsoleEndToEnd drives the web console in headless Chromium against
// a real `veer control` (on a real etcd) and a real `veer gateway`.
func TestConsoleEndToEnd(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium not found: run scripts/test-deps.sh (Debian package chromium)")
	}
	shots := os.Getenv("VEER_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	go buildVeer() // in parallel with etcd's start
	etcd := etcdtest.New(t)
	if _, err := buildVeer(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	const viewerToken = "viewer-token-0123456789"
	sum := sha256.Sum256([]byte(viewerToken))
	cfg := fmt.Sprintf(`data_dir: %s
listen: 127.0.0.1:0
listen_plain: 127.0.0.1:0
admin_listen: 127.0.0.1:0
tokens: [{name: watcher, role: viewer, sha256: %s}]
etcd: {endpoints: [%q]}
`, filepath.Join(dir, "control"), hex.EncodeToString(sum[:]), etcd.URL)
	if err := os.WriteFile(filepath.Join(dir, "control.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctl := startVeer(t, "control", "--config", filepath.Join(dir, "control.yaml"))
	plain := ctl.await(t, `plain http://(\S+)`)
	admin := "http://" + ctl.await(t, `admin API http://([^;\s]+)`)
	tokRaw, err := os.ReadFile(filepath.Join(dir, "control", "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	adminToken := strings.TrimSpace(string(tokRaw))
	if code, _, b := adminCall(t, "PUT", admin+"/v1/admin/docs/routing/table", adminToken, consoleTable, "X-Veer-Reason", "initial table"); code != 200 {
		t.Fatalf("seeding the table: %d %s", code, b)
	}
	untilTrue(t, "the seeded table answers", func() bool { return routeAnswer(t, plain) == "a1.example.com" })

	// a gateway following and announcing itself to the same etcd, with a
	// backend in this process
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") }))
	defer backend.Close()
	gwCfg := fmt.Sprintf(`listen: {addr: "off", plain: "127.0.0.1:0"}
admin: {addr: "127.0.0.1:0", token: gw-admin}
data_dir: %s
routes: [{name: api, clusters: [{name: east}, {name: west}]}]
clusters: [{name: east, backends: [{address: %[2]q}]}, {name: west, backends: [{address: %[2]q}]}]
shed: {enabled: true, default_tier: sheddable_plus}
limits: {keys: ["header:X-Tenant"], dimensions: [{name: tenant}]}
trusted_networks: [127.0.0.0/8]
control_store: {endpoints: [%[3]q]}
`, filepath.Join(dir, "gw"), strings.TrimPrefix(backend.URL, "http://"), etcd.URL)
	if err := os.WriteFile(filepath.Join(dir, "gateway.yaml"), []byte(gwCfg), 0o600); err != nil {
		t.Fatal(err)
	}
	gw := startVeer(t, "gateway", "--config", filepath.Join(dir, "gateway.yaml"))
	gwAddrs := gw.awaitAll(t, `"plain":"([^"]+)","admin":"([^"]+)"`)
	gwPlain, gwAdmin := gwAddrs[1], gwAddrs[2]
	gw.await(t, `(announced to the control store)`)

	// the browser
	actx, cancelA := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 800),
		chromedp.Env("TMPDIR="+t.TempDir())) // its singleton socket's dir, else left in /tmp
	defer cancelA()
	bctx, cancelB := chromedp.NewContext(actx)
	defer cancelB()
	var consoleErrs []string
	var cmu sync.Mutex
	if err := chromedp.Listen(bctx, func(ev any) {
		cmu.Lock()
		defer cmu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeWarning || e.Type == runtime.ConsoleAPICalledTypeAssert {
				var args []string
				for _, a := range e.Args {
					args = append(args, a.Description+fmt.Sprint(a.Value))
				}
				consoleErrs = append(consoleErrs, string(e.Type)+": "+strings.Join(args, " "))
			}
		case *cdplog.EventEntryAdded:
			// CSP violations and other browser complaints; the network's own
			// lines (the 4xx answers this test provokes on purpose) are not
			// errors of the page
			if e.Entry.Source != cdplog.EntrySourceNetwork && (e.Entry.Level == cdplog.EntryLevelError || e.Entry.Level == cdplog.EntryLevelWarning) {
				consoleErrs = append(consoleErrs, string(e.Entry.Source)+" "+string(e.Entry.Level)+": "+e.Entry.Text)
			}
		case *runtime.EventExceptionThrown:
			d := e.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			consoleErrs = append(consoleErrs, "exception: "+msg)
		}
	}); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	ctx, cancel := context.WithTimeout(bctx, 90*time.Second)
	defer cancel()
	run := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	eval := func(expr string) any {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[any](expr, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("evaluate %s: %v", expr, err)
		}
		return v
	}
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// waitJS polls a JavaScript condition in the page.
	waitJS := func(what, expr string) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(10*time.Second), chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
			body, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main")))
			t.Fatalf("%s: %s did not hold: %v\npage: %s", what, expr, err, body)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	signIn := func(token string) {
		t.Helper()
		run("sign in", chromedp.Navigate(admin+"/ui/"), chromedp.WaitVisible(css("#token")),
			chromedp.SendKeys(css("#token"), token+"\r")) // Enter submits: the keyboard path
		waitJS("signed in", `document.getElementById('who').textContent.includes('Signed in')`)
		waitJS("rules loaded", `document.getElementById('rules-info').textContent.includes('version')`)
	}
	axeSrc, err := os.ReadFile("testdata/axe/axe.min.js")
	if err != nil {
		t.Fatal(err)
	}
	// accessible runs axe-core in the page: no serious or critical
	// violation.
	accessible := func(page string) {
		t.Helper()
		if eval(`typeof axe === 'undefined'`) == true {
			if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](string(axeSrc)+"\n;true")); err != nil {
				t.Fatalf("loading axe-core: %v", err)
			}
		}
		v := eval(`axe.run(document, {resultTypes: ['violations']}).then(r => ({passes: r.passes.length, all: r.violations.map(v => v.impact + ' ' + v.id).join(', '),
			bad: r.violations.filter(v => v.impact === 'serious' || v.impact === 'critical').map(v => v.impact + ' ' + v.id + ': ' + v.help + ' at ' + v.nodes.slice(0, 3).map(n => n.target.join(' ')).join(', '))}))`).(map[string]any)
		if l, ok := v["bad"].([]any); !ok || len(l) > 0 || v["passes"].(float64) < 10 {
			t.Errorf("%s: axe-core: %v", page, v)
		}
		t.Logf("%s: axe-core: %v rules passed; minor/moderate: %q", page, v["passes"], v["all"])
	}
	// keyboard Tabs through the page from its first control (the skip
	// link: Chromium keeps its sequential-focus starting point where the
	// last page's focus was, even after a blur): every visible control gets
	// focus.
	keyboard := func(page string) {
		t.Helper()
		const controls = `[...document.querySelectorAll('a[href], button, input, select, textarea')].filter(e => e.offsetParent !== null && !e.disabled && !e.closest('dialog'))`
		n := eval(`window.__seen = new Set(); if (!window.__kb) { window.__kb = true; document.addEventListener('focusin', e => window.__seen.add(e.target), true); } document.activeElement && document.activeElement.blur(); document.querySelector('.skip').focus(); ` + controls + `.length`).(float64)
		tabs := make([]chromedp.Action[chromedp.Void], int(n)+3)
		for i := range tabs {
			tabs[i] = chromedp.KeyEvent(kb.Tab)
		}
		run("tab through "+page, tabs...)
		if missed := eval(controls + `.filter(e => !window.__seen.has(e)).map(e => e.id || e.textContent.trim()).join(', ')`); missed != "" {
			t.Errorf("%s: not reached by Tab: %v", page, missed)
		}
	}
	tableVersion := func() string {
		_, h, _ := adminCall(t, "GET", admin+"/v1/admin/docs/routing/table", adminToken, "")
		return h.Get("ETag")
	}

	// 1. a viewer sees no write control, and the API refuses its writes
	run("open", chromedp.Navigate(admin+"/ui/"), chromedp.WaitVisible(css("#token")))
	shot("01-signin")
	accessible("sign-in")
	signIn(viewerToken)
	waitJS("viewer sees the rules", `document.querySelector('#rule-0-name') !== null`)
	for _, page := range []string{"rules", "emergency", "sites", "criticality", "limits", "rollouts", "docs", "audit"} {
		eval(`location.hash = '#` + page + `'`)
		waitJS("viewer on "+page, `!document.getElementById('page-`+page+`').hidden`)
		visibleWrites := eval(`[...document.querySelectorAll('.write, .admin-only, .rollback, #rule-add, #em-set, #rules-publish, #crit-publish, #doc-publish, #lim-add, #lim-publish, #ro-start, [data-action]')].filter(e => e.offsetParent !== null).length`)
		if visibleWrites != 0.0 {
			t.Errorf("viewer sees %v write controls on %s", visibleWrites, page)
		}
	}
	eval(`location.hash = '#rules'`)
	if ro := eval(`document.getElementById('rule-0-name').readOnly`); ro != true {
		t.Error("viewer's rule fields are editable")
	}
	shot("02-rules-viewer")
	viewerPut := eval(`fetch('/v1/admin/playbook', {method: 'POST', headers: {Authorization: 'Bearer ` + viewerToken + `'}, body: '{"action":"site_down","site":"a","reason":"x"}'}).then(r => r.status)`)
	if viewerPut != float64(http.StatusForbidden) {
		t.Errorf("viewer's playbook call answered %d, want 403", viewerPut)
	}
	viewerRollout := eval(`fetch('/v1/admin/rollouts/api', {method: 'POST', headers: {Authorization: 'Bearer ` + viewerToken + `'}, body: '{"action":"abort","reason":"x"}'}).then(r => r.status)`)
	if viewerRollout != float64(http.StatusForbidden) {
		t.Errorf("viewer's rollout call answered %d, want 403", viewerRollout)
	}

	// 2. an admin: change a rule, preview who moves
	signIn(adminToken)
	v1 := tableVersion()
	run("widen the bucket", chromedp.SetValue(css("#rule-0-bucket\\.to"), "100"), chromedp.Click(css("#rules-preview")))
	waitJS("preview", `document.querySelector('#rules-moves .moves-summary') !== null`)
	if s := text("#rules-moves"); !strings.Contains(s, "a1.example.com -> b1.example.com") || !strings.Contains(s, "would change primary domain") {
		t.Errorf("preview: %q, want moves a1 -> b1", s)
	}
	shot("03-rules-preview")

	// 3. an invalid edit shows the API's field error at the field and
	// changes nothing
	run("invalid edit", chromedp.SetValue(css("#rule-0-bucket\\.from"), "50"), chromedp.SetValue(css("#rule-0-bucket\\.to"), "20"),
		chromedp.SetValue(css("#rules-reason"), "bad edit"), chromedp.Click(css("#rules-publish")))
	waitJS("field error", `document.getElementById('err-0').textContent.includes('rules[0].bucket')`)
	if invalid := eval(`document.getElementById('rule-0-bucket.from').getAttribute('aria-invalid') === 'true'`); invalid != true {
		t.Error("the bucket field is not marked invalid")
	}
	if v := tableVersion(); v != v1 {
		t.Errorf("an invalid edit changed the table: version %s, was %s", v, v1)
	}
	shot("04-rules-field-error")

	// 4. publish: /v1/route answers differently
	run("valid edit", chromedp.SetValue(css("#rule-0-bucket\\.from"), "0"), chromedp.SetValue(css("#rule-0-bucket\\.to"), "100"),
		chromedp.SetValue(css("#rules-reason"), "move everyone to b"), chromedp.Click(css("#rules-publish")))
	waitJS("published", `document.getElementById('rules-status').textContent.includes('Published version')`)
	untilTrue(t, "POST /v1/route answers b1 after publish", func() bool { return routeAnswer(t, plain) == "b1.example.com" })
	shot("05-rules-published")

	// 5. a stale edit: someone else publishes; the console shows the 409
	// and the newer version
	other := strings.Replace(consoleTable, `"to": 10`, `"to": 30`, 1)
	if code, _, b := adminCall(t, "PUT", admin+"/v1/admin/docs/routing/table", adminToken, other, "X-Veer-Reason", "someone else"); code != 200 {
		t.Fatalf("the other writer: %d %s", code, b)
	}
	run("stale edit", chromedp.SetValue(css("#rule-0-name"), "shift-renamed"),
		chromedp.SetValue(css("#rules-reason"), "stale"), chromedp.Click(css("#rules-publish")))
	waitJS("409 shown", `!document.getElementById('rules-conflict').hidden`)
	if s := text("#rules-conflict"); !strings.Contains(s, "409") || !strings.Contains(s, `"to": 30`) {
		t.Errorf("conflict box: %q, want the 409 and the newer version", s)
	}
	shot("06-rules-conflict")

	// 6. roll back to version 1 from the history
	run("load newer", chromedp.Click(css("#rules-conflict button")))
	waitJS("version 3 loaded", `document.getElementById('rules-conflict').hidden && document.getElementById('rules-info').textContent.includes('version 3.') && document.querySelector('.rollback[data-version="2"]') !== null`)
	run("diff", chromedp.Click(css(`#rules-history button`)))
	waitJS("diff shown", `!document.getElementById('rules-diff').hidden`)
	run("rollback", chromedp.SetValue(css("#rules-reason"), "back to the start"), chromedp.Click(css(`.rollback[data-version="1"]`)))
	waitJS("confirm dialog", `document.getElementById('confirm').open`)
	run("confirm", chromedp.Click(css("#confirm-yes")))
	waitJS("rolled back", `document.getElementById('rules-status').textContent.includes('Rolled back')`)
	untilTrue(t, "POST /v1/route answers a1 after rollback", func() bool { return routeAnswer(t, plain) == "a1.example.com" })
	shot("07-rules-rolled-back")

	// 7. the emergency override, with its effect stated before it applies
	signIn(adminToken) // a navigation reloads the page: the token was in memory only
	eval(`location.hash = '#emergency'`)
	waitJS("emergency form", `document.querySelectorAll('#em-site option').length > 1`)
	run("set override", chromedp.SetValue(css("#em-site"), "b"), chromedp.SetValue(css("#em-reason"), "dc a fire drill"),
		chromedp.Click(css("#em-set")))
	waitJS("confirmation", `document.getElementById('confirm').open`)
	if s := text("#confirm-text"); !strings.Contains(s, "Send every device to site b") || !strings.Contains(s, "a1.example.com -> b1.example.com") {
		t.Errorf("confirmation: %q, want its effect", s)
	}
	shot("08-emergency-confirm")
	run("confirm", chromedp.Click(css("#confirm-yes")))
	waitJS("override set", `document.getElementById('em-status').textContent.includes('Override set')`)
	untilTrue(t, "POST /v1/route answers the override", func() bool { return routeAnswer(t, plain) == "b1.example.com" })
	shot("09-emergency-set")

	// 8. the audit log has it, with its reason
	eval(`location.hash = '#audit'`)
	run("audit", chromedp.WaitVisible(css("#audit-prefix")),
		chromedp.SetValue(css("#audit-prefix"), "routing/emergency"), chromedp.SetValue(css("#audit-text"), "fire drill"),
		chromedp.Click(css("#audit-form button")))
	waitJS("audit filtered to the override", `(() => { const rows = [...document.querySelectorAll('#audit-table tbody tr')];
		return rows.length === 1 && rows[0].textContent.includes('routing/emergency') && rows[0].textContent.includes('emergency_set: dc a fire drill') && rows[0].textContent.includes('admin'); })()`)
	shot("10-audit")

	eval(`location.hash = '#sites'`)
	waitJS("sites", `document.querySelector('[data-cluster="a/a1"]') !== null`)
	run("cluster down", chromedp.SetValue(css("#sites-reason"), "a1 maintenance"), chromedp.Click(css(`[data-cluster="a/a1"] button`)))
	waitJS("playbook confirmation", `document.getElementById('confirm').open && document.getElementById('confirm-text').textContent.includes('a/a1 down')`)
	run("confirm", chromedp.Click(css("#confirm-yes")))
	waitJS("cluster shown down", `document.getElementById('sites-status').textContent.includes('cluster_down done') && document.querySelector('[data-cluster="a/a1"] .badge.down') !== null`)
	if code, _, b := adminCall(t, "GET", admin+"/v1/admin/docs/routing/state", adminToken, ""); code != 200 || !strings.Contains(string(b), `"a/a1"`) {
		t.Errorf("routing/state after the playbook: %d %s", code, b)
	}
	shot("11-sites")

	// 9. the criticality table, pre-filled from the callers the gateway
	// saw: traffic with Rpc-Caller, the callers appear with their counts;
	// a tier picked for one of them and for a caller typed in, published,
	// applied by the gateway
	for i := range 9 {
		req, _ := http.NewRequest("GET", "http://"+gwPlain+"/", nil)
		req.Header.Set("Rpc-Caller", []string{"rider-app", "batch"}[min(i/7, 1)]) // 7 rider-app, 2 batch
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	eval(`location.hash = '#criticality'`)
	waitJS("criticality page", `document.getElementById('crit-info').textContent !== ''`)
	// (?. : the poll must not throw while the page is still rendering)
	waitJS("observed callers pre-filled", `document.getElementById('crit-0-name')?.value === 'api' &&
		document.querySelector('[data-seen="rider-app"] .count')?.textContent === '7' && document.querySelector('[data-seen="batch"] .count')?.textContent === '2' &&
		document.getElementById('crit-0-o0')?.dataset.caller === 'rider-app' && document.getElementById('crit-0-ot0')?.value === ''`)
	if got := text("#crit-observed"); !strings.Contains(got, "1 announced gateway saw") {
		t.Errorf("observed note: %q", got)
	}
	shot("12a-criticality-observed")
	run("pick a tier for a seen caller, add one", chromedp.SetValue(css("#crit-0-ot0"), "critical"), chromedp.Click(css("#crit-0-add")))
	waitJS("caller rows", `document.getElementById('crit-0-c0')?.value === 'rider-app' && document.getElementById('crit-0-c1') !== null`)
	run("name the added caller", chromedp.SetValue(css("#crit-0-c1"), "checkout"), chromedp.SetValue(css("#crit-0-t1"), "critical"),
		chromedp.SetValue(css("#crit-reason"), "rider-app and checkout are trip flow"), chromedp.Click(css("#crit-publish")))
	waitJS("criticality published", `document.getElementById('crit-status').textContent.includes('Published version')`)
	// after the reload: rider-app is a table row with its count; batch is
	// still only seen
	waitJS("table rows and seen rows", `document.querySelector('tr[data-caller="rider-app"] .count')?.textContent === '7' &&
		document.querySelector('[data-seen="batch"]') !== null && document.querySelector('[data-seen="rider-app"]') === null`)
	shot("12-criticality")
	if _, _, b := adminCall(t, "GET", admin+"/v1/admin/docs/gateway/criticality", adminToken, ""); !strings.Contains(string(b), `"rider-app": "critical"`) || strings.Contains(string(b), "batch") {
		t.Errorf("published gateway/criticality: %s, want rider-app critical and no batch", b)
	}
	untilTrue(t, "the gateway applied gateway/criticality", func() bool {
		resp, err := http.Get("http://" + gwAdmin + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), `veer_gateway_store_documents_total{document="gateway/criticality",result="applied"} 1`)
	})
	// the gateway resolves the published tier for the seen caller
	if _, _, b := adminCall(t, "GET", "http://"+gwAdmin+"/admin/callers", "", ""); !strings.Contains(string(b), `{"caller":"rider-app","count":7,"tier":"critical"}`) ||
		!strings.Contains(string(b), `{"caller":"batch","count":2,"tier":"sheddable_plus"}`) {
		t.Errorf("gateway /admin/callers after publishing: %s", b)
	}

	// 10. any document as text: an invalid one shows its line and field and
	// is not written
	eval(`location.hash = '#docs'`)
	waitJS("documents", `document.querySelector('#docs-table') !== null`)
	run("new document", chromedp.Click(css("#doc-new")), chromedp.SetValue(css("#doc-key"), "access/nodes"),
		chromedp.SetValue(css("#doc-text"), "ttl_seconds: 300\nregions:\n  east: [{addr: \"not an address\"}]\n"),
		chromedp.SetValue(css("#doc-reason"), "edge nodes"), chromedp.Click(css("#doc-publish")))
	waitJS("document field error", `document.getElementById('doc-field-error').textContent.startsWith('line ')`)
	if code, _, _ := adminCall(t, "GET", admin+"/v1/admin/docs/access/nodes", adminToken, ""); code != 404 {
		t.Errorf("an invalid access/nodes was written: GET answers %d", code)
	}
	shot("13-documents-field-error")
	run("valid access nodes", chromedp.SetValue(css("#doc-text"), `{"regions": {"east": [{"addr": "203.0.113.10:443", "protocols": ["h3", "h2"]}, {"addr": "203.0.113.11:443", "down": true}]}}`),
		chromedp.SetValue(css("#doc-reason"), "edge nodes"), chromedp.Click(css("#doc-publish")))
	waitJS("access nodes published", `document.getElementById('doc-status').textContent.includes('Published access/nodes version 1')`)
	eval(`location.hash = '#sites'`)
	waitJS("access nodes with their state", `document.querySelector('[data-node="203.0.113.11:443"] .badge.down') !== null && document.querySelector('[data-node="203.0.113.10:443"] .badge.up') !== null`)
	shot("13b-sites-access-nodes")

	rig := consoleRig{admin: admin, adminToken: adminToken, gwPlain: gwPlain, gwAdmin: gwAdmin, run: run, eval: eval, waitJS: waitJS, text: text, shot: shot}
	consoleLimitsAndRollouts(t, rig)
	consoleDNSHealth(t, rig, etcd.URL, dir)

	for _, page := range []string{"rules", "emergency", "sites", "criticality", "limits", "rollouts", "docs", "audit"} {
		eval(`location.hash = '#` + page + `'`)
		waitJS(page, `!document.getElementById('page-`+page+`').hidden`)
		accessible(page)
		keyboard(page)
	}

	// 11. live traffic: the chart moves when load starts; a killed gateway
	// turns red within 3 s
	eval(`location.hash = '#live'`)
	waitJS("gateway listed up", `document.querySelector('#gw-table tr.gw-up') !== null`)
	stop := make(chan struct{})
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			req, _ := http.NewRequest("GET", "http://"+gwPlain+"/", nil)
			req.Header.Set("Veer-Criticality", []string{"critical", "sheddable_plus", "sheddable"}[i%3])
			if i%2 == 1 { // tenant acme: limited to 1/s since step 10b
				req.Header.Set("X-Tenant", "acme")
			}
			if resp, err := http.DefaultClient.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
	}()
	waitJS("chart moves", `Number(document.getElementById('live-chart').dataset.last) > 5 && document.querySelector('#live-chart path[data-series="critical"]') !== null`)
	// limited by tier moves: the acme half of the load is refused (429)
	// past 1/s, counted under each request's tier
	waitJS("limited by tier", `(() => { const s = document.getElementById('live-limited')?.textContent || '';
		return ['critical', 'sheddable_plus', 'sheddable'].every(t => new RegExp('(^|, )' + t + ' [1-9]').test(s)) &&
			document.querySelector('#live-chart path[data-series="limited"]') !== null &&
			/[1-9]/.test(document.querySelector('#gw-table td.limited-tier')?.textContent || ''); })()`)
	shot("14-live")
	accessible("live")
	run("phone width", chromedp.EmulateViewport(390, 844))
	shot("15-live-phone")
	run("desktop width", chromedp.EmulateViewport(1280, 800))
	close(stop)
	<-loadDone
	if err := gw.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	waitJS("killed gateway turns red", `document.querySelector('#gw-table tr.gw-down') !== null`)
	if d := time.Since(killed); d > 3*time.Second {
		t.Errorf("the killed gateway was shown down after %v, want within 3s", d)
	} else {
		t.Logf("the killed gateway was shown down %v after SIGKILL", d.Round(time.Millisecond))
	}
	shot("16-live-gateway-down")

	cmu.Lock()
	defer cmu.Unlock()
	if len(consoleErrs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(consoleErrs, "\n"))
	}
	t.Logf("screenshots in %s", shots)
}
