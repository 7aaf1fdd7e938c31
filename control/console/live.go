package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/veerhq/veer/store"
)

// whoami asks the admin API who the request's token is: 200 for any valid
// token, else the API's own 401.
func whoami(admin http.Handler, r *http.Request) (int, string) {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, "/v1/admin/whoami", nil)
	if err != nil {
		return http.StatusInternalServerError, err.Error()
	}
	req.Header.Set("Authorization", r.Header.Get("Authorization"))
	rec := &recorder{h: http.Header{}, code: http.StatusOK}
	admin.ServeHTTP(rec, req)
	return rec.code, rec.body.String()
}

// recorder keeps a bounded in-process answer.
type recorder struct {
	h    http.Header
	code int
	body bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.h }
func (r *recorder) WriteHeader(c int)   { r.code = c }
func (r *recorder) Write(b []byte) (int, error) {
	if r.body.Len() < 4096 {
		r.body.Write(b[:min(len(b), 4096-r.body.Len())])
	}
	return len(b), nil
}

// hub polls the gateways while at least one stream is open and fans the
// frames out.
type hub struct {
	c  *Console
	st store.Store

	mu     sync.Mutex
	subs   map[chan []byte]struct{}
	cancel context.CancelFunc
	done   chan struct{}
	last   []byte
}

func newHub(c *Console, st store.Store) *hub {
	return &hub{c: c, st: st, subs: map[chan []byte]struct{}{}}
}

// serve streams frames as server-sent events until the client leaves.
func (h *hub) serve(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	ch := h.join()
	defer h.leave(ch)
	fmt.Fprintf(w, "retry: 1000\n\n")
	fl.Flush()
	for {
		select {
		case <-r.Context().Done():
			return
		case f, ok := <-ch:
			if !ok {
				return
			}
			if _, err := fmt.Fprintf(w, "event: frame\ndata: %s\n\n", f); err != nil {
				return
			}
			fl.Flush()
		}
	}
}

func (h *hub) join() chan []byte {
	ch := make(chan []byte, 4)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.subs[ch] = struct{}{}
	if h.last != nil {
		ch <- h.last
	}
	if h.cancel == nil {
		ctx, cancel := context.WithCancel(context.Background())
		h.cancel, h.done = cancel, make(chan struct{})
		go h.run(ctx, h.done)
	}
	return ch
}

func (h *hub) leave(ch chan []byte) {
	h.mu.Lock()
	delete(h.subs, ch)
	var cancel context.CancelFunc
	var done chan struct{}
	if len(h.subs) == 0 && h.cancel != nil {
		cancel, done = h.cancel, h.done
		h.cancel, h.done, h.last = nil, nil, nil
	}
	h.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

func (h *hub) broadcast(f []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.last = f
	for ch := range h.subs {
		select {
		case ch <- f:
		default: // a slow reader misses this frame
		}
	}
}

// run polls every PollEvery until ctx ends.
func (h *hub) run(ctx context.Context, done chan struct{}) {
	defer close(done)
	p := &poller{c: h.c, st: h.st, prev: map[string]scrape{}}
	t := h.c.clk.NewTicker(h.c.cfg.PollEvery)
	defer t.Stop()
	for {
		f := p.poll(ctx)
		if ctx.Err() != nil {
			return
		}
		if b, err := json.Marshal(f); err != nil {
			h.c.log.Error("console: live frame not encoded", "err", err)
		} else {
			h.broadcast(b)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// poller reads the announcements and the gateways and keeps the previous
// counters to turn them into rates.
type poller struct {
	c     *Console
	st    store.Store
	gws   []store.Announcement
	prev  map[string]scrape
	stErr string
}

type scrape struct {
	at time.Time
	s  samples
}

func (p *poller) poll(ctx context.Context) Frame {
	now := p.c.clk.Now()
	lctx, cancel := context.WithTimeout(ctx, p.c.cfg.ScrapeTimeout)
	docs, _, err := p.st.List(lctx, store.KeyGatewaysPrefix)
	cancel()
	if err != nil {
		p.stErr = "store: " + err.Error() + " (showing the last list of gateways)"
	} else {
		p.stErr = ""
		p.gws = p.gws[:0]
		for _, d := range docs {
			a, err := store.ParseAnnouncement(d.Value)
			if err != nil {
				p.c.log.Warn("console: ignoring a bad gateway announcement", "key", d.Key, "err", err)
				continue
			}
			p.gws = append(p.gws, a)
		}
	}
	f := Frame{Time: now.UTC(), Error: p.stErr, Gateways: make([]Gateway, len(p.gws))}
	var wg sync.WaitGroup
	got := make([]*scrape, len(p.gws))
	errs := make([]error, len(p.gws))
	for i, a := range p.gws {
		wg.Go(func() {
			s, err := p.read(ctx, a)
			if err == nil {
				got[i] = &scrape{at: p.c.clk.Now(), s: s}
			}
			errs[i] = err
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for i, a := range p.gws {
		seen[a.Name] = true
		g := Gateway{Name: a.Name, Admin: a.Admin, Started: a.Started}
		if errs[i] != nil {
			g.Error = errs[i].Error()
			delete(p.prev, a.Name)
		} else {
			g.Up = true
			prev, ok := p.prev[a.Name]
			if !ok {
				prev = *got[i]
			}
			g.fill(prev.s, got[i].s, got[i].at.Sub(prev.at).Seconds())
			p.prev[a.Name] = *got[i]
		}
		f.Gateways[i] = g
	}
	for n := range p.prev {
		if !seen[n] {
			delete(p.prev, n)
		}
	}
	f.total()
	return f
}

// read fetches and parses one gateway's /metrics.
func (p *poller) read(ctx context.Context, a store.Announcement) (samples, error) {
	ctx, cancel := context.WithTimeout(ctx, p.c.cfg.ScrapeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.Admin+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := p.c.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("not answering: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/metrics answered %s", resp.Status)
	}
	return parseSamples(io.LimitReader(resp.Body, maxMetricsBody))
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
