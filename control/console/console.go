// Package console is veer control's web console: a few static pages and a
// little hand-written JavaScript, embedded in the binary, served at /ui/ on
// the admin listener beside the admin API (/v1/admin/), plus a live view of
// the gateways' traffic streamed as server-sent events (/ui/live).
//
// Contract. The console is a client of the admin API: every read and write
// the pages make is an ordinary admin API call carrying the token the user
// signed in with, so roles, If-Match (409 on a stale edit), validation
// (400 naming key:line: field), the audit log and dry runs are the API's
// own. It adds no write endpoint. The token lives in the page's memory
// only (never in storage or a cookie): a reload signs out. Writes need it
// in an Authorization header, which a browser never attaches on its own,
// and Mount refuses a write whose Origin or Sec-Fetch-Site says it comes
// from another site (CSRF). Every page is served with a
// Content-Security-Policy that allows scripts and styles from /ui/ only (no
// inline script or style, no CDN), frame-ancestors 'none', nosniff and no
// referrer.
//
// The live view reads, once a second and only while someone watches, the
// /metrics of every gateway announced under store.KeyGatewaysPrefix
// (gateway.Announce), and streams per gateway, route and cluster the
// requests per second, errors by outcome kind, shed and admitted requests
// by tier, limited requests by dimension, breaker states and backends out
// of rotation. The stream needs a viewer token (checked by the admin API's
// whoami).
//
// The sites page shows the access nodes as the private DNS servers probe
// them: GET /ui/dns (viewer token) reads, on each call, every DNS server
// announced under store.KeyDNSServersPrefix (`veer dns` with --metrics and
// a control store), at its /access/health (within ScrapeTimeout); the page
// asks once a second while it is open. A server that does not answer is
// shown down with the error, its nodes unknown.
//
// The criticality page pre-fills the endpoint × caller rows the table does
// not have yet from GET /ui/callers (viewer token): every announced
// gateway's GET /admin/callers (the callers it saw per route over the last
// hour, with counts), read when the page opens, counts summed. The
// operator picks each tier and publishes through the admin API as for any
// other edit. A gateway that does not answer within ScrapeTimeout is named
// on the page and counts nothing.
//
// Failure mode: a gateway whose /metrics does not answer within
// Config.ScrapeTimeout is shown down in the next frame (within two seconds
// at the defaults); a store that cannot be listed keeps the last list of
// gateways and says so in the frame's error field. A slow browser misses
// frames rather than holding the poller.
package console

import (
	"cmp"
	"embed"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/store"
)

//go:embed assets
var assets embed.FS

// Defaults.
const (
	// DefaultPollEvery is how often the live view reads each gateway.
	DefaultPollEvery = time.Second
	// DefaultScrapeTimeout bounds one read of a gateway's /metrics; a
	// gateway that takes longer is shown down.
	DefaultScrapeTimeout = 800 * time.Millisecond
	// maxMetricsBody bounds a gateway's /metrics answer.
	maxMetricsBody = 8 << 20
)

// CSP is the Content-Security-Policy of every console page: no inline
// script or style, nothing from another origin.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"font-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"

// ErrCrossSite: a write came from a page of another origin.
var ErrCrossSite = errors.New("console: cross-site write refused")

// Config is what a config file can say; the zero value works.
type Config struct {
	// PollEvery: how often the live view reads each gateway; default
	// DefaultPollEvery.
	PollEvery time.Duration `json:"poll_every,omitempty" yaml:"poll_every,omitempty"`
	// ScrapeTimeout bounds one read of a gateway; default
	// DefaultScrapeTimeout. It must be shorter than PollEvery.
	ScrapeTimeout time.Duration `json:"scrape_timeout,omitempty" yaml:"scrape_timeout,omitempty"`
}

func (c Config) withDefaults() Config {
	c.PollEvery = cmp.Or(c.PollEvery, DefaultPollEvery)
	c.ScrapeTimeout = cmp.Or(c.ScrapeTimeout, DefaultScrapeTimeout)
	return c
}

// Validate names the bad field.
func (c Config) Validate() error {
	if err := config.NotNegative("poll_every", c.PollEvery); err != nil {
		return err
	}
	if err := config.NotNegative("scrape_timeout", c.ScrapeTimeout); err != nil {
		return err
	}
	if d := c.withDefaults(); d.ScrapeTimeout >= d.PollEvery {
		return config.Field("scrape_timeout", "%v: must be shorter than poll_every (%v)", d.ScrapeTimeout, d.PollEvery)
	}
	return nil
}

// Options are run-time wiring; the zero value works.
type Options struct {
	// Logger; default slog.Default().
	Logger *slog.Logger
	// Clock times the live view; default clock.Real.
	Clock clock.Clock
	// Client reads the gateways; default a client with no redirects.
	Client *http.Client
}

// Console serves the pages and the live stream.
type Console struct {
	cfg    Config
	log    *slog.Logger
	clk    clock.Clock
	client *http.Client
	static http.Handler
}

// New builds a console.
func New(cfg Config, opts Options) (*Console, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, err
	}
	c := &Console{cfg: cfg.withDefaults(), log: obs.LoggerOr(opts.Logger), clk: clock.Or(opts.Clock), client: opts.Client}
	if c.client == nil {
		c.client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	c.static = http.StripPrefix("/ui/", http.FileServerFS(sub))
	return c, nil
}

// Mount returns admin with the console added: /ui/ (pages), /ui/live (the
// live stream), /ui/callers (the callers the gateways saw), /ui/dns (the
// access nodes' health as the announced DNS servers probe them); every
// other request goes to admin, writes only when they are not cross-site.
// control.Options.UI takes it.
func (c *Console) Mount(admin http.Handler, st store.Store) http.Handler {
	live := newHub(c, st)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ui/", http.StatusFound) })
	mux.HandleFunc("GET /ui/live", func(w http.ResponseWriter, r *http.Request) {
		secure(w)
		if code, msg := whoami(admin, r); code != http.StatusOK {
			http.Error(w, msg, code)
			return
		}
		if st == nil {
			http.Error(w, "live traffic needs the control store", http.StatusServiceUnavailable)
			return
		}
		live.serve(w, r)
	})
	mux.HandleFunc("GET /ui/callers", func(w http.ResponseWriter, r *http.Request) {
		secure(w)
		if code, msg := whoami(admin, r); code != http.StatusOK {
			http.Error(w, msg, code)
			return
		}
		if st == nil {
			http.Error(w, "observed callers need the control store", http.StatusServiceUnavailable)
			return
		}
		c.serveCallers(w, r, st)
	})
	mux.HandleFunc("GET /ui/dns", func(w http.ResponseWriter, r *http.Request) {
		secure(w)
		if code, msg := whoami(admin, r); code != http.StatusOK {
			http.Error(w, msg, code)
			return
		}
		if st == nil {
			http.Error(w, "the DNS servers' health needs the control store", http.StatusServiceUnavailable)
			return
		}
		c.serveDNS(w, r, st)
	})
	mux.HandleFunc("GET /ui/", func(w http.ResponseWriter, r *http.Request) {
		secure(w)
		w.Header().Set("Cache-Control", "no-cache")
		c.static.ServeHTTP(w, r)
	})
	mux.Handle("/", admin)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !safeMethod(r.Method) && crossSite(r) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"error":"` + ErrCrossSite.Error() + `: Origin or Sec-Fetch-Site names another site"}` + "\n"))
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// secure sets the headers every console answer carries.
func secure(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// crossSite reports whether a browser said the request comes from another
// origin. Clients that are not browsers (curl, the CLI) send neither
// header and pass.
func crossSite(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return true
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return false
	}
	u, err := url.Parse(o)
	return err != nil || o == "null" || !strings.EqualFold(u.Host, r.Host)
}
