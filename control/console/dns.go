package console

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/veerhq/veer/store"
)

// dnsHealthPath is where an announced `veer dns` serves its access nodes'
// health (dnsserver.NodeHealthPath, on its metrics listener).
const dnsHealthPath = "/access/health"

// maxDNSHealthBody bounds one DNS server's health answer.
const maxDNSHealthBody = 4 << 20

// DNSHealth is what GET /ui/dns returns: every announced private DNS
// server (store.KeyDNSServersPrefix) and its access nodes as its health
// checks see them.
type DNSHealth struct {
	Servers []DNSServer `json:"servers"`
	// Error: the store could not be listed.
	Error string `json:"error,omitempty"`
}

// DNSServer is one announced DNS server. Up: its health answer came
// within ScrapeTimeout; else Error says why and Nodes is empty.
type DNSServer struct {
	Name    string    `json:"name"`
	Admin   string    `json:"admin"`
	Started time.Time `json:"started"`
	Up      bool      `json:"up"`
	Error   string    `json:"error,omitempty"`
	// Interval is how often it probes the nodes.
	Interval time.Duration `json:"interval_ns"`
	Nodes    []DNSNode     `json:"nodes"`
}

// DNSNode is one access node of one access domain: Probed when its check
// ran, Up by the last probe, Since the time of the last change.
type DNSNode struct {
	Domain  string    `json:"domain"`
	Addr    string    `json:"addr"`
	Region  string    `json:"region,omitempty"`
	Check   string    `json:"check,omitempty"`
	Probed  bool      `json:"probed"`
	Up      bool      `json:"up"`
	Since   time.Time `json:"since,omitzero"`
	Checked time.Time `json:"checked,omitzero"`
	Error   string    `json:"error,omitempty"`
}

// dnsHealth lists the announced DNS servers and reads their health at once
// (each within ScrapeTimeout).
func (c *Console) dnsHealth(ctx context.Context, st store.Store) DNSHealth {
	out := DNSHealth{Servers: []DNSServer{}}
	lctx, cancel := context.WithTimeout(ctx, c.cfg.ScrapeTimeout)
	docs, _, err := st.List(lctx, store.KeyDNSServersPrefix)
	cancel()
	if err != nil {
		out.Error = "store: " + err.Error()
		return out
	}
	for _, d := range docs {
		a, err := store.ParseAnnouncement(d.Value)
		if err != nil {
			c.log.Warn("console: ignoring a bad DNS server announcement", "key", d.Key, "err", err)
			continue
		}
		out.Servers = append(out.Servers, DNSServer{Name: a.Name, Admin: a.Admin, Started: a.Started, Nodes: []DNSNode{}})
	}
	var wg sync.WaitGroup
	for i := range out.Servers {
		s := &out.Servers[i]
		wg.Go(func() {
			rep, err := c.readDNSHealth(ctx, s.Admin)
			if err != nil {
				s.Error = err.Error()
				return
			}
			s.Up, s.Interval, s.Nodes = true, rep.Interval, rep.Nodes
		})
	}
	wg.Wait()
	slices.SortFunc(out.Servers, func(a, b DNSServer) int { return strings.Compare(a.Name, b.Name) })
	return out
}

type dnsReport struct {
	Interval time.Duration `json:"interval_ns"`
	Nodes    []DNSNode     `json:"nodes"`
}

// readDNSHealth fetches one DNS server's health answer.
func (c *Console) readDNSHealth(ctx context.Context, admin string) (dnsReport, error) {
	var rep dnsReport
	ctx, cancel := context.WithTimeout(ctx, c.cfg.ScrapeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, admin+dnsHealthPath, nil)
	if err != nil {
		return rep, err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return rep, fmt.Errorf("not answering: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return rep, fmt.Errorf("%s answered %s", dnsHealthPath, resp.Status)
	}
	return decodeDNSReport(io.LimitReader(resp.Body, maxDNSHealthBody))
}

// decodeDNSReport decodes a DNS server's health answer; Nodes is never nil.
func decodeDNSReport(r io.Reader) (dnsReport, error) {
	var rep dnsReport
	if err := json.NewDecoder(r).Decode(&rep); err != nil {
		return dnsReport{}, fmt.Errorf("%s: %w", dnsHealthPath, err)
	}
	if rep.Nodes == nil {
		rep.Nodes = []DNSNode{}
	}
	return rep, nil
}

// serveDNS answers GET /ui/dns.
func (c *Console) serveDNS(w http.ResponseWriter, r *http.Request, st store.Store) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(c.dnsHealth(r.Context(), st))
}
