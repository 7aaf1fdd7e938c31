package gateway

import (
	"cmp"
	"context"
	"errors"
	"net"
	"os"
	"time"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/store"
)

// DefaultAnnounceEvery is how often Announce checks that its announcement
// is still in the store.
const DefaultAnnounceEvery = 10 * time.Second

// AnnounceOptions tune Announce; the zero value works.
type AnnounceOptions struct {
	// Name identifies the gateway; default "<host name>-<admin address>".
	Name string
	// URL is the admin listener's base URL the control plane reads;
	// default http://<admin address>, with an unspecified host (0.0.0.0,
	// ::) replaced by the host name.
	URL string
	// Every is the heartbeat: how often the announcement is checked and
	// written again when it is missing or differs (someone deleted it, the
	// store lost it); default DefaultAnnounceEvery.
	Every time.Duration
	// Clock; default clock.Real.
	Clock clock.Clock
}

// ErrNoAdmin: Announce needs the admin listener (admin.addr), which is
// where the control plane reads the gateway's state.
var ErrNoAdmin = errors.New("gateway: announce needs an admin listener (admin.addr)")

// Announce writes the gateway's store.Announcement under
// store.KeyGatewaysPrefix, with its routes and their clusters as it runs
// them at each heartbeat (a reload or a followed gateway/ document shows
// at the next one), re-writes it whenever a heartbeat finds it
// missing or changed, and deletes it when ctx ends (a clean stop); it
// blocks, so run it on its own goroutine after Start. A steady gateway
// writes nothing: every write appends to the key's history, and the
// liveness the console shows comes from reading the gateway itself every
// second, not from the document's age. A gateway that died without
// deleting it stays listed, and shown down, until it is deleted
// (veer control delete gateways/NAME) or comes back.
//
// Store errors are logged and retried on the next heartbeat; they never
// affect serving.
func (g *Gateway) Announce(ctx context.Context, s store.Store, opts AnnounceOptions) error {
	admin := g.Addrs().Admin
	if admin == "" {
		return ErrNoAdmin
	}
	host, _ := os.Hostname()
	url := opts.URL
	if url == "" {
		h, p, _ := net.SplitHostPort(admin)
		if ip := net.ParseIP(h); ip != nil && ip.IsUnspecified() && host != "" {
			h = host
		}
		url = "http://" + net.JoinHostPort(h, p)
	}
	a := store.Announcement{Name: cmp.Or(opts.Name, host+"-"+admin), Admin: url, PID: os.Getpid()}
	clk := clock.Or(opts.Clock)
	a.Started = clk.Now().UTC().Truncate(time.Second)
	return store.Announce(ctx, s, store.KeyGatewaysPrefix+a.Name, a, store.AnnounceOptions{
		Every: cmp.Or(opts.Every, DefaultAnnounceEvery), Clock: clk, Logger: g.log,
		Author: "gateway " + a.Name, Reason: "gateway announce",
		Refresh: func(a *store.Announcement) { a.Routes, a.Truncated = announcedRoutes(g.Config()) },
	})
}

// announcedRoutes lists cfg's routes and their clusters, bounded by
// store.MaxAnnouncedRoutes and store.MaxAnnouncedClusters (truncated true
// when some were left out). The list is never nil: an empty one says "no
// routes", nil "not said".
func announcedRoutes(cfg Config) (routes []store.AnnouncedRoute, truncated bool) {
	routes = []store.AnnouncedRoute{}
	for i, r := range cfg.Routes {
		if i == store.MaxAnnouncedRoutes {
			return routes, true
		}
		ar := store.AnnouncedRoute{Name: r.Name, Clusters: []string{}}
		for j, c := range r.Clusters {
			if j == store.MaxAnnouncedClusters {
				truncated = true
				break
			}
			ar.Clusters = append(ar.Clusters, c.Name)
		}
		routes = append(routes, ar)
	}
	return routes, truncated
}
