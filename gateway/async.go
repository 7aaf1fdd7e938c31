package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/veerhq/veer/async"
	"github.com/veerhq/veer/config"
)

// DefaultAsyncTenantKey is the default source of an async invocation's
// tenant.
const DefaultAsyncTenantKey = "host"

// Async is the gateway's async section: the durable invocation queue
// (package async) behind routes marked async: true and requests that send
// Prefer: respond-async. Off unless Enabled or a route is async.
type Async struct {
	// Enabled starts the queue even when no route is async, for requests
	// that ask with Prefer: respond-async.
	Enabled      bool `yaml:"enabled" json:"enabled"`
	async.Config `yaml:",inline" json:",inline"`
	// TenantKey: where an invocation's tenant comes from, like a limits
	// key: "route", "client_ip", "host" (default) or "header:NAME".
	TenantKey string `yaml:"tenant_key" json:"tenant_key"`
}

// AsyncEngineFunc opens the async engine (cmd/veer wires
// gateway/gatewayasync, on JetStream, so that this package does not link
// NATS). cfg.Dir is already filled from the data dir.
type AsyncEngineFunc func(cfg async.Config) (async.Engine, error)

func (a *Async) validate() error {
	c := a.Config
	errs := []error{c.Validate()}
	switch k := a.TenantKey; {
	case k == "", k == "route", k == "client_ip", k == "host":
	case strings.HasPrefix(k, "header:") && len(k) > len("header:"):
	default:
		errs = append(errs, config.Field("tenant_key", "%q: want route, client_ip, host or header:NAME", k))
	}
	return errors.Join(errs...)
}

// asyncWanted reports whether cfg needs the queue.
func asyncWanted(c *Config) bool {
	if c.Async.Enabled {
		return true
	}
	for _, r := range c.Routes {
		if r.Async {
			return true
		}
	}
	return false
}

// startAsync opens the engine and starts the workers when the config asks
// for the queue.
func (g *Gateway) startAsync(c *Config) error {
	if !asyncWanted(c) {
		return nil
	}
	if g.opts.AsyncEngine == nil {
		return config.Field("async", "this build has no async engine wired (Options.AsyncEngine)")
	}
	ac := c.Async.Config
	if ac.Dir == "" {
		ac.Dir = filepath.Join(c.DataDir, "async")
	}
	eng, err := g.opts.AsyncEngine(ac)
	if err != nil {
		return config.In("async", err)
	}
	s, err := async.New(ac, eng, asyncDispatcher{g}, async.Options{Logger: g.log, Registerer: g.reg, OnStatus: g.opts.OnAsyncStatus})
	if err != nil {
		_ = eng.Close()
		return config.In("async", err)
	}
	g.async = s
	g.asyncTenant = parseKeys([]string{cmpOr(c.Async.TenantKey, DefaultAsyncTenantKey)})[0]
	s.Start()
	return nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// asyncFixed rejects an Apply that would turn the queue on or change its
// section: both need a restart.
func (g *Gateway) asyncFixed(old, c *Config) []error {
	var errs []error
	if !reflect.DeepEqual(old.Async, c.Async) {
		errs = append(errs, config.Field("async", "cannot change at run time; restart the gateway"))
	}
	if g.async == nil && asyncWanted(c) {
		errs = append(errs, config.Field("routes", "an async route needs the async queue, which starts only at start-up; restart the gateway"))
	}
	return errs
}

func (g *Gateway) closeAsync() {
	if g.async != nil {
		_ = g.async.Close()
	}
}

// mountAsyncAdmin serves the queue's operations (async.Service.AdminHandler)
// on the admin listener behind the admin token.
func (g *Gateway) mountAsyncAdmin(mux *http.ServeMux, token string) {
	if g.async != nil {
		mux.Handle("/admin/async/", g.auth(token, g.async.AdminHandler().ServeHTTP))
	}
}

// Async returns the gateway's async service, nil when off.
func (g *Gateway) Async() *async.Service { return g.async }

// tenantOf reads an async request's tenant.
func (g *Gateway) tenantOf(r *http.Request, rt *route) string {
	switch k := g.asyncTenant; k.kind {
	case keyRoute:
		if rt != nil {
			return rt.cfg.Name
		}
		return ""
	case keyClientIP:
		h, _, _ := net.SplitHostPort(r.RemoteAddr)
		return h
	case keyHost:
		return normalizeHost(r.Host)
	default:
		return r.Header.Get(k.header)
	}
}

// serveAsyncStatus answers the status API (async.StatusPath) when the queue
// runs; it reports whether it did.
func (g *Gateway) serveAsyncStatus(w http.ResponseWriter, r *http.Request, t *table) bool {
	if g.async == nil || !strings.HasPrefix(r.URL.Path+"/", async.StatusPath) {
		return false
	}
	g.async.ServeStatus(w, r, g.tenantOf(r, t.match(r.Host, r.URL.Path)))
	return true
}

// submitAsync stores the request in the queue when its route is async or
// it prefers so, and answers 202; it reports whether it did.
func (g *Gateway) submitAsync(w http.ResponseWriter, r *http.Request, rt *route) bool {
	if g.async == nil || !(rt.cfg.Async || async.PrefersAsync(r.Header)) || r.Header.Get("Upgrade") != "" {
		return false
	}
	g.async.ServeSubmit(w, r, g.tenantOf(r, rt), rt.cfg.Name)
	return true
}

// asyncDispatcher runs an invocation's attempt through the gateway's own
// dispatch: the route's clusters with health, ejection, breakers and
// cross-cluster retry.
type asyncDispatcher struct{ g *Gateway }

// errRouteGone: the invocation's route is no longer configured.
var errRouteGone = errors.New("gateway: the invocation's route is no longer configured")

func (d asyncDispatcher) Dispatch(ctx context.Context, req *http.Request, inv *async.Invocation) (*http.Response, error) {
	t := d.g.snap.Load()
	rt := t.routeNamed(inv.Route)
	if rt == nil {
		rt = t.match(inv.Host, req.URL.Path)
	}
	if rt == nil {
		return &http.Response{StatusCode: http.StatusNotFound, Status: "404 " + errRouteGone.Error(),
			Body: io.NopCloser(bytes.NewReader(nil)), Header: http.Header{}, Request: req}, nil
	}
	st := &reqState{input: input{snap: t, route: rt, replayable: true, idempotent: true}}
	if len(inv.Body) > 0 {
		st.body = inv.Body
	}
	if h := rt.cfg.HostRewrite; h != "" {
		req.Host = h
	}
	req.Header.Add("Via", "1.1 veer")
	return (&dispatcher{g: d.g}).RoundTrip(req.WithContext(context.WithValue(ctx, stateKey{}, st)))
}
