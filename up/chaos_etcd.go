package up

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"
)

// etcdKillNew is how many new sessions etcd-kill launches while etcd is
// down and again after a write that follows its return.
const etcdKillNew = 6

// adminAnswer is one admin API answer.
type adminAnswer struct {
	code       int
	retryAfter string
	body       string
	revision   int64
}

// adminPlaybook posts one playbook to control's admin API and returns the
// answer whatever its status (etcd-kill judges the 503).
func (c *Chaos) adminPlaybook(ctx context.Context, st State, action, site string) (adminAnswer, error) {
	raw, err := os.ReadFile(st.ControlTokenFile)
	if err != nil {
		return adminAnswer{}, fmt.Errorf("control's admin token: %w", err)
	}
	body, _ := json.Marshal(map[string]string{"action": action, "site": site, "reason": "veer chaos etcd-kill"})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+st.Admin+"/v1/admin/playbook", bytes.NewReader(body))
	if err != nil {
		return adminAnswer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(raw)))
	req.Header.Set("Content-Type", "application/json")
	cl := *c.client
	cl.Timeout = 10 * time.Second
	resp, err := cl.Do(req)
	if err != nil {
		return adminAnswer{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	a := adminAnswer{code: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), body: strings.TrimSpace(string(b))}
	if a.code == http.StatusOK {
		var info struct {
			Revision int64 `json:"revision"`
		}
		if err := json.Unmarshal(b, &info); err != nil {
			return a, fmt.Errorf("playbook %s %s: %w", action, site, err)
		}
		a.revision = info.Revision
	}
	return a, nil
}

// playbookRetry posts the playbook until it is applied (200), retrying
// 503s (etcd's client still reconnecting) up to timeout.
func (c *Chaos) playbookRetry(ctx context.Context, st State, action, site string, timeout time.Duration) (adminAnswer, int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for tries := 1; ; tries++ {
		a, err := c.adminPlaybook(ctx, st, action, site)
		if err == nil && a.code == http.StatusOK {
			return a, tries, nil
		}
		if err == nil && a.code != http.StatusServiceUnavailable {
			return a, tries, fmt.Errorf("playbook %s %s: %d %s", action, site, a.code, a.body)
		}
		if serr := sleepCtx(ctx, 500*time.Millisecond); serr != nil {
			return a, tries, fmt.Errorf("playbook %s %s not applied within %v: %w", action, site, timeout, errors.Join(err, serr))
		}
	}
}

func runEtcdKill(ctx context.Context, c *Chaos, r *Result) error {
	st, err := c.state(ctx)
	if err != nil {
		return err
	}
	pid := st.Engines.EtcdPid
	r.Mechanism = fmt.Sprintf("SIGKILL of etcd (pid %d, %s) while the population runs; veer up restarts it after restart_after on the same data; writes through control's admin API (%s, the operator's token); %d new sessions while it is down, %d after a site_down written once it is back (POST /v1/devices, retired at the end)",
		pid, st.Engines.Store, st.Admin, etcdKillNew, etcdKillNew)
	fmt.Fprintf(c.out, "chaos: etcd-kill: SIGKILL pid %d\n", pid)
	if err := signal(pid, syscall.SIGKILL); err != nil {
		return err
	}
	// a write while etcd is down is refused, with a time to come back
	down, err := c.adminPlaybook(ctx, st, "site_down", "a")
	if err != nil {
		return err
	}
	if down.code == http.StatusOK { // etcd answered after all: undo
		_, _, _ = c.playbookRetry(context.WithoutCancel(ctx), st, "site_up", "a", c.cfg.Recover)
	}
	refused := down.code == http.StatusServiceUnavailable && down.retryAfter != ""
	r.measure("admin write with etcd down: %d, Retry-After %q", down.code, down.retryAfter)

	// new sessions bootstrap from control's last snapshot
	var launched []NewDevice // retired at the end: the population stays as it was
	defer c.retireAtEnd(ctx, "etcd-kill", &launched)
	news, err := c.newDevices(ctx, etcdKillNew, 0)
	if err != nil {
		return fmt.Errorf("new sessions with etcd down: %w", err)
	}
	launched = append(launched, news...)
	answered := 0
	for _, d := range news {
		if d.Source == "service" && (d.Site == "a" || d.Site == "b") {
			answered++
		}
	}
	r.measure("%d of %d new sessions answered by the routing service with etcd down", answered, len(news))
	w, err := c.window(ctx, "")
	if err != nil {
		return err
	}
	r.record(w, fmt.Sprintf("of all devices over %v with etcd down", c.cfg.Window))

	// etcd returns: a write is applied and answers follow it
	if err := c.until(ctx, c.cfg.Recover, func(st State, _ Snapshot) bool {
		p := st.Engines.EtcdPid
		return p != 0 && p != pid
	}); err != nil {
		return fmt.Errorf("etcd not restarted: %w", err)
	}
	back := time.Now()
	a, tries, err := c.playbookRetry(ctx, st, "site_down", "a", c.cfg.Recover)
	if err != nil {
		return err
	}
	defer func() {
		if _, _, err := c.playbookRetry(context.WithoutCancel(ctx), st, "site_up", "a", c.cfg.Recover); err != nil {
			fmt.Fprintf(c.out, "chaos: etcd-kill: site_up a: %v\n", err)
		}
	}()
	r.measure("after the restart site_down a applied %.1fs later (try %d, revision %d)", time.Since(back).Seconds(), tries, a.revision)
	after, err := c.newDevices(ctx, etcdKillNew, a.revision)
	if err != nil {
		return err
	}
	launched = append(launched, after...)
	onB := 0
	for _, d := range after {
		if d.Site == "b" && d.Source == "service" {
			onB++
		}
	}
	r.measure("%d of %d new sessions then got site b from the routing service", onB, len(after))
	r.Pass = refused && answered == len(news) && len(news) == etcdKillNew && r.Success >= 0.99 && w.OK > 0 &&
		onB == len(after) && len(after) == etcdKillNew
	return nil
}
