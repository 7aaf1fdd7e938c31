package console

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sync"

	"github.com/veerhq/veer/store"
)

// maxCallersBody bounds a gateway's /admin/callers answer (its log is
// bounded: 100 callers of at most 256 bytes per endpoint).
const maxCallersBody = 8 << 20

// Callers is what GET /ui/callers returns: the callers every announced
// gateway saw per endpoint over its last hour (gateway GET /admin/callers),
// counts summed over the gateways, for the criticality page to pre-fill
// the endpoint × caller rows the table does not have yet.
type Callers struct {
	Endpoints []EndpointCallers `json:"endpoints"`
	// Gateways lists each announced gateway and why it was not read, if so.
	Gateways []CallersSource `json:"gateways"`
	// Error: the store could not be listed.
	Error string `json:"error,omitempty"`
}

// EndpointCallers is one endpoint (route name) and its callers by count,
// highest first.
type EndpointCallers struct {
	Endpoint string        `json:"endpoint"`
	Callers  []CallerCount `json:"callers"`
}

// CallerCount is one caller's requests over the last hour on all gateways,
// and the tiers the gateways resolve for it now (one unless their tables
// differ).
type CallerCount struct {
	Caller string   `json:"caller"`
	Count  uint64   `json:"count"`
	Tiers  []string `json:"tiers,omitempty"`
}

// CallersSource is one gateway read for Callers.
type CallersSource struct {
	Name  string `json:"name"`
	Error string `json:"error,omitempty"`
}

// gatewayCallers is a gateway's /admin/callers answer.
type gatewayCallers struct {
	Endpoints []struct {
		Endpoint string `json:"endpoint"`
		Callers  []struct {
			Caller string `json:"caller"`
			Count  uint64 `json:"count"`
			Tier   string `json:"tier"`
		} `json:"callers"`
	} `json:"endpoints"`
}

// callers lists the announced gateways, reads their /admin/callers at once
// (each within ScrapeTimeout) and merges them. A gateway that does not
// answer is listed with its error and counts nothing.
func (c *Console) callers(ctx context.Context, st store.Store) Callers {
	out := Callers{Endpoints: []EndpointCallers{}, Gateways: []CallersSource{}}
	lctx, cancel := context.WithTimeout(ctx, c.cfg.ScrapeTimeout)
	docs, _, err := st.List(lctx, store.KeyGatewaysPrefix)
	cancel()
	if err != nil {
		out.Error = "store: " + err.Error()
		return out
	}
	var gws []store.Announcement
	for _, d := range docs {
		if a, err := store.ParseAnnouncement(d.Value); err == nil {
			gws = append(gws, a)
		}
	}
	got := make([]gatewayCallers, len(gws))
	errs := make([]error, len(gws))
	var wg sync.WaitGroup
	for i, a := range gws {
		wg.Go(func() { got[i], errs[i] = c.readCallers(ctx, a) })
	}
	wg.Wait()
	for i, a := range gws {
		src := CallersSource{Name: a.Name}
		if errs[i] != nil {
			src.Error = errs[i].Error()
		}
		out.Gateways = append(out.Gateways, src)
	}
	out.Endpoints = mergeCallers(got)
	return out
}

// mergeCallers sums the gateways' counts per endpoint and caller; endpoints
// by name, callers by count (highest first) then name.
func mergeCallers(got []gatewayCallers) []EndpointCallers {
	type key struct{ ep, caller string }
	counts := map[key]*CallerCount{}
	eps := map[string][]*CallerCount{}
	for _, g := range got {
		for _, e := range g.Endpoints {
			for _, cc := range e.Callers {
				k := key{e.Endpoint, cc.Caller}
				m := counts[k]
				if m == nil {
					m = &CallerCount{Caller: cc.Caller}
					counts[k] = m
					eps[e.Endpoint] = append(eps[e.Endpoint], m)
				}
				if m.Count += cc.Count; m.Count < cc.Count {
					m.Count = math.MaxUint64 // saturates
				}
				if cc.Tier != "" && !slices.Contains(m.Tiers, cc.Tier) {
					m.Tiers = append(m.Tiers, cc.Tier)
					slices.Sort(m.Tiers)
				}
			}
		}
	}
	out := []EndpointCallers{}
	for _, ep := range sortedKeys(eps) {
		cs := eps[ep]
		slices.SortFunc(cs, func(a, b *CallerCount) int {
			return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Caller, b.Caller))
		})
		e := EndpointCallers{Endpoint: ep}
		for _, cc := range cs {
			e.Callers = append(e.Callers, *cc)
		}
		out = append(out, e)
	}
	return out
}

// readCallers fetches one gateway's /admin/callers.
func (c *Console) readCallers(ctx context.Context, a store.Announcement) (gatewayCallers, error) {
	var g gatewayCallers
	ctx, cancel := context.WithTimeout(ctx, c.cfg.ScrapeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.Admin+"/admin/callers", nil)
	if err != nil {
		return g, err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return g, fmt.Errorf("not answering: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return g, fmt.Errorf("/admin/callers answered %s", resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxCallersBody)).Decode(&g); err != nil {
		return gatewayCallers{}, fmt.Errorf("/admin/callers: %w", err)
	}
	return g, nil
}

// serveCallers answers GET /ui/callers.
func (c *Console) serveCallers(w http.ResponseWriter, r *http.Request, st store.Store) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(c.callers(r.Context(), st))
}
