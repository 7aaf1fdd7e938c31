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

// siteDownNew is how many new sessions site-down launches before and
// again after the playbook (each an app install bootstrapping through the
// routing service).
const siteDownNew = 6

// playbook runs one of control's playbooks through its admin API, as an
// operator would, and returns the store revision it wrote.
func (c *Chaos) playbook(ctx context.Context, st State, action, site string) (int64, error) {
	raw, err := os.ReadFile(st.ControlTokenFile)
	if err != nil {
		return 0, fmt.Errorf("control's admin token: %w", err)
	}
	body, _ := json.Marshal(map[string]string{"action": action, "site": site, "reason": "veer chaos site-down"})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+st.Admin+"/v1/admin/playbook", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(raw)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("playbook %s %s: %s: %s", action, site, resp.Status, strings.TrimSpace(string(b)))
	}
	var info struct {
		Revision int64 `json:"revision"`
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return 0, fmt.Errorf("playbook %s %s: %w", action, site, err)
	}
	return info.Revision, nil
}

// newDevices asks veer up for n new sessions once control has applied rev.
func (c *Chaos) newDevices(ctx context.Context, n int, rev int64) ([]NewDevice, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("http://%s/v1/devices?n=%d&after_revision=%d", c.api, n, rev), nil)
	if err != nil {
		return nil, err
	}
	// bootstrapping n devices one after the other takes longer than
	// one API call's usual bound
	cl := *c.client
	cl.Timeout = 30 * time.Second
	resp, err := cl.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return nil, fmt.Errorf("POST /v1/devices: %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	var out []NewDevice
	return out, json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out)
}

// retireDevices asks veer up to stop the sessions newDevices launched
// (DELETE /v1/devices), so that a scenario leaves the population as it
// found it (a soak plays it again and again).
func (c *Chaos) retireDevices(ctx context.Context, devs []NewDevice) error {
	if len(devs) == 0 {
		return nil
	}
	ids := make([]string, len(devs))
	for i, d := range devs {
		ids[i] = d.ID
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, fmt.Sprintf("http://%s/v1/devices?ids=%s", c.api, strings.Join(ids, ",")), nil)
	if err != nil {
		return err
	}
	cl := *c.client
	cl.Timeout = 30 * time.Second // each device's request in flight ends first
	resp, err := cl.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return fmt.Errorf("DELETE /v1/devices: %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	return nil
}

// retireAtEnd retires *devs when the scenario ends, saying so if it
// cannot (the verdict stands: the sessions are the scenario's probe).
func (c *Chaos) retireAtEnd(ctx context.Context, name string, devs *[]NewDevice) {
	if err := c.retireDevices(context.WithoutCancel(ctx), *devs); err != nil {
		fmt.Fprintf(c.out, "chaos: %s: retiring its %d new sessions: %v\n", name, len(*devs), err)
	}
}

// runSiteDown is seeds 003/004's site playbook: site_down for site a
// through control's admin API while traffic runs; new sessions must get
// site b, existing ones keep site a while it serves; then site a's gateway
// is killed and its existing sessions must fail over.
func runSiteDown(ctx context.Context, c *Chaos, r *Result) error {
	st, err := c.state(ctx)
	if err != nil {
		return err
	}
	gw := st.Gateways["a"]
	pid := gw.Pid
	r.Mechanism = fmt.Sprintf("control's site_down playbook for site a (POST %s/v1/admin/playbook, the operator's admin token), %d new sessions bootstrapped before and after it (POST /v1/devices, retired at the end), then SIGKILL of site a's gateway (pid %d, %s)",
		st.Admin, siteDownNew, pid, strings.Join(gw.Addrs, ","))
	// a baseline: sessions that start before the playbook follow the
	// routing table (most on site a), so that "the new ones get b" below
	// is the playbook's doing
	var launched []NewDevice // retired at the end: the population stays as it was
	defer c.retireAtEnd(ctx, "site-down", &launched)
	base, err := c.newDevices(ctx, siteDownNew, 0)
	if err != nil {
		return err
	}
	launched = append(launched, base...)
	baseA := 0
	for _, d := range base {
		if d.Site == "a" {
			baseA++
		}
	}
	r.measure("before the playbook %d of %d new sessions got site a", baseA, len(base))
	before, err := c.stats(ctx)
	if err != nil {
		return err
	}
	n := before.GroupSize("a")
	if n == 0 {
		return errors.New("no device on site a")
	}
	fmt.Fprintf(c.out, "chaos: site-down: site_down a\n")
	rev, err := c.playbook(ctx, st, "site_down", "a")
	if err != nil {
		return err
	}
	defer func() {
		if _, err := c.playbook(context.WithoutCancel(ctx), st, "site_up", "a"); err != nil {
			fmt.Fprintf(c.out, "chaos: site-down: site_up a: %v\n", err)
		}
	}()
	news, err := c.newDevices(ctx, siteDownNew, rev)
	if err != nil {
		return err
	}
	launched = append(launched, news...)
	onB, fromService := 0, 0
	for _, d := range news {
		if d.Site == "b" {
			onB++
		}
		if d.Source == "service" {
			fromService++
		}
	}
	r.measure("%d of %d new sessions got site b as primary (%d answered by the routing service)", onB, len(news), fromService)

	// existing sessions keep site a while it serves
	kept, err := c.window(ctx, "a")
	if err != nil {
		return err
	}
	w2 := kept.to
	onA := w2.Domains["a."+zoneOf(st)].Sub(kept.from.Domains["a."+zoneOf(st)])
	stayed := w2.InState("a", "primary") + w2.InState("a", "OFF")
	r.measure("site a's %d existing sessions kept site a: %d on primary, %d requests answered there over %v (%.2f%% success)", n, stayed, onA.OK, c.cfg.Window, 100*kept.Success())

	// then site a fails
	fmt.Fprintf(c.out, "chaos: site-down: SIGKILL pid %d\n", pid)
	if err := signal(pid, syscall.SIGKILL); err != nil {
		return err
	}
	on, after, err := c.detectBackup(ctx, r, fmt.Sprintf("all %d existing site-a sessions", n), "the kill", before.RequestTimeout)
	if err != nil {
		return err
	}
	w, err := c.window(ctx, "a")
	if err != nil {
		return err
	}
	r.record(w, fmt.Sprintf("of site a's existing sessions over %v from one request timeout (%v) %s", c.cfg.Window, before.RequestTimeout, after))
	r.Pass = on && baseA > 0 && onB == len(news) && len(news) == siteDownNew && stayed == n && onA.OK > 0 &&
		kept.Success() >= 0.99 && r.Success >= 0.99 && w.OK > 0
	return nil
}

// zoneOf is the access domains' zone, from the state's domain -> site map.
func zoneOf(st State) string {
	for d, site := range st.Domains {
		if site == "a" {
			return strings.TrimPrefix(d, "a.")
		}
	}
	return DefaultZone
}
