package failover

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/veerhq/veer/outcome"
)

// CanaryHeader marks canary requests ("Veer-Canary: 1") so that servers
// and logs can tell them from app traffic.
const CanaryHeader = "Veer-Canary"

// maxCanaryBody bounds what is read (and discarded) of a canary's answer.
const maxCanaryBody = 64 << 10

// sendCanaryLocked starts a canary to domain d unless one is in flight.
func (t *Transport) sendCanaryLocked(d int) {
	if t.closed || t.inflight[d] {
		return // the result of the canary in flight will answer
	}
	t.inflight[d] = true
	t.wg.Add(1)
	go t.runCanary(d)
}

func (t *Transport) runCanary(d int) {
	defer t.wg.Done()
	o := t.probe(d)
	at := t.clk.Now()
	bad := misconfigured(o.Status)
	if bad {
		t.m.misconfigured[d].Inc()
		if !t.warnedPath[d].Swap(true) {
			t.log.Warn("failover: the canary path is not a health endpoint of this domain: every canary to it fails, so failover to it can never succeed",
				"domain", t.hosts[d], "path", t.cfg.CanaryPath, "status", o.Status,
				"fix", "canary_path: a path the domain answers 200 on while it can serve; veer gateway answers "+DefaultCanaryPath+" itself")
		}
	}
	t.stepNotify(func(time.Time) Action {
		t.inflight[d] = false
		t.m.canary(d, o.OK())
		return t.policy.CanaryDone(at, d, o)
	}, func(time.Time) {
		if t.cfg.OnCanary != nil {
			t.cfg.OnCanary(t.hosts[d], Canary{At: at, OK: o.OK(), Kind: o.Kind, Status: o.Status, Misconfigured: bad})
		}
	})
}

// misconfigured reports whether a canary's status says the path is wrong
// rather than the domain down: not found, or behind authentication.
func misconfigured(status int) bool {
	return status == http.StatusNotFound || status == http.StatusUnauthorized || status == http.StatusForbidden
}

// probe sends one canary to domain d through the wrapped round tripper and
// classifies its result.
func (t *Transport) probe(d int) outcome.Outcome {
	ctx, cancel := context.WithTimeout(t.ctx, t.cfg.CanaryTimeout)
	defer cancel()
	scheme := "https"
	switch {
	case t.cfg.CanaryScheme != "":
		scheme = t.cfg.CanaryScheme
	case t.scheme.Load() == schemeHTTP:
		scheme = "http"
	}
	host := t.ports.Load().hosts[d]
	u := &url.URL{Scheme: scheme, Host: host, Path: t.cfg.CanaryPath}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return outcome.Outcome{Kind: outcome.NetworkOther, Err: err}
	}
	req.Header.Set(CanaryHeader, "1")
	resp, err := t.next.RoundTrip(req)
	o := outcome.ClassifyAt(resp, err, t.clk.Now())
	if err == nil {
		io.Copy(io.Discard, io.LimitReader(resp.Body, maxCanaryBody))
		resp.Body.Close()
	}
	return o
}
