package up

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// MaxNewDevices bounds one POST /v1/devices.
const MaxNewDevices = 50

// applyWait bounds how long POST /v1/devices waits for the control plane
// to have applied the store revision it names (after_revision).
const applyWait = 5 * time.Second

// NewDevice is one device launched on request (POST /v1/devices): a new
// session, bootstrapped through the routing service at that moment.
type NewDevice struct {
	ID      string `json:"id"`
	Primary string `json:"primary"`
	// Site is the site its routing answer put it on ("a", "b", "wap").
	Site string `json:"site"`
	// Source is where its answer came from (routing.Source: "service",
	// "cache", "default").
	Source string `json:"source"`
}

// devs is a copy of the running devices.
func (s *System) devs() []*device {
	s.devMu.Lock()
	defer s.devMu.Unlock()
	return append([]*device(nil), s.devices...)
}

// errClosed: the system is stopping.
var errClosed = errors.New("up: stopping")

// launched is a device that AddDevices started: its own context, so that
// RetireDevices can stop it alone, and done, closed when its run returns.
type launched struct {
	d      *device
	cancel context.CancelFunc
	done   chan struct{}
}

// AddDevices bootstraps n new devices now (each a new app session: a new
// device ID, routing.Bootstrap against the control plane) and starts their
// traffic; they join the population until RetireDevices or Close.
func (s *System) AddDevices(ctx context.Context, n int) ([]NewDevice, error) {
	if n < 1 || n > MaxNewDevices {
		return nil, fmt.Errorf("up: n must be 1..%d", MaxNewDevices)
	}
	s.devMu.Lock()
	if s.env == nil || s.runCtx == nil || s.runCtx.Err() != nil {
		s.devMu.Unlock()
		return nil, errClosed
	}
	first := s.nextDev
	s.nextDev += n // distinct IDs for concurrent calls
	s.devMu.Unlock()

	out := make([]NewDevice, 0, n)
	devs := make([]*device, 0, n)
	var err error
	for i := range n {
		d, derr := newDevice(ctx, s.env, first+i)
		if derr != nil {
			err = derr
			break
		}
		devs = append(devs, d)
		out = append(out, NewDevice{ID: d.id, Primary: d.primary, Site: d.group, Source: d.source})
	}
	s.devMu.Lock()
	defer s.devMu.Unlock()
	// Close cancels runCtx under devMu: no wg.Add after its wg.Wait
	if err == nil && s.runCtx.Err() != nil {
		err = errClosed
	}
	if err != nil {
		for _, d := range devs {
			d.close()
		}
		return nil, err
	}
	if s.added == nil {
		s.added = map[string]*launched{}
	}
	for _, d := range devs {
		s.devices = append(s.devices, d)
		dctx, cancel := context.WithCancel(s.runCtx)
		l := &launched{d: d, cancel: cancel, done: make(chan struct{})}
		s.added[d.id] = l
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer close(l.done)
			d.run(dctx, s.env)
		}()
	}
	return out, nil
}

// ErrUnknownDevice: RetireDevices was given an ID that no running device
// launched by AddDevices has (the initial population is not retired).
var ErrUnknownDevice = errors.New("up: no such launched device")

// RetireDevices stops the devices AddDevices launched with these IDs, as
// an app session ends: each is taken out of the population (Stats stops
// counting it), its traffic stops (a request in flight is cancelled and
// not counted), its transports and network path are closed (their
// connections and goroutines end) and its routing state file is removed.
// It returns once every device's loop has returned and it is closed, or
// when ctx ends (the devices are out of the population and cancelled
// then; their close is left to Close). An unknown or repeated ID retires
// nothing and returns ErrUnknownDevice naming it.
func (s *System) RetireDevices(ctx context.Context, ids []string) error {
	if len(ids) == 0 || len(ids) > MaxRetire {
		return fmt.Errorf("up: ids: want 1..%d", MaxRetire)
	}
	s.devMu.Lock()
	var unknown []string
	seen := map[string]bool{}
	for _, id := range ids {
		if s.added[id] == nil || seen[id] {
			unknown = append(unknown, id)
		}
		seen[id] = true
	}
	if len(unknown) > 0 {
		s.devMu.Unlock()
		return fmt.Errorf("%w: %s", ErrUnknownDevice, strings.Join(unknown, ","))
	}
	ls := make([]*launched, 0, len(ids))
	for _, id := range ids {
		ls = append(ls, s.added[id])
		delete(s.added, id)
	}
	s.devices = slices.DeleteFunc(s.devices, func(d *device) bool { return seen[d.id] })
	s.devMu.Unlock()
	for _, l := range ls {
		l.cancel()
	}
	var errs []error
	for _, l := range ls {
		select {
		case <-l.done:
		case <-ctx.Done():
			// out of the population, cancelled: its loop returns soon
			// (s.wg); Close no longer sees it, so close it then
			go func() { <-l.done; l.d.close() }()
			errs = append(errs, fmt.Errorf("up: retiring %s: %w", l.d.id, ctx.Err()))
			continue
		}
		l.d.close()
		if err := os.Remove(filepath.Join(s.env.stateDir, l.d.id+".route.json")); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// MaxRetire bounds one DELETE /v1/devices.
const MaxRetire = 4 * MaxNewDevices

// handleRetireDevices is DELETE /v1/devices?ids=dev-0050,dev-0051: the
// devices that POST /v1/devices launched are retired (RetireDevices); 204
// once they are stopped, 404 naming an ID no launched device has.
func (s *System) handleRetireDevices(w http.ResponseWriter, r *http.Request) {
	ids, err := parseIDs(r.URL.Query().Get("ids"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	switch err := s.RetireDevices(r.Context(), ids); {
	case errors.Is(err, ErrUnknownDevice):
		http.Error(w, err.Error(), http.StatusNotFound)
	case err != nil:
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// parseIDs reads a comma-separated list of device IDs (1..MaxRetire, each
// non-empty, at most 64 bytes of letters, digits and '-').
func parseIDs(q string) ([]string, error) {
	if q == "" {
		return nil, errors.New("ids: want a comma-separated list of device IDs")
	}
	ids := strings.Split(q, ",")
	if len(ids) > MaxRetire {
		return nil, fmt.Errorf("ids: at most %d", MaxRetire)
	}
	for _, id := range ids {
		if id == "" || len(id) > 64 || strings.TrimFunc(id, func(r rune) bool {
			return r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		}) != "" {
			return nil, fmt.Errorf("ids: %.70q is not a device ID", id)
		}
	}
	return ids, nil
}

// handleAddDevices is POST /v1/devices?n=N[&after_revision=R]: N new
// devices, bootstrapped once the control plane has applied store revision
// R (a playbook's answer names it), so that their sessions see it.
func (s *System) handleAddDevices(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	n, err := strconv.Atoi(q.Get("n"))
	if err != nil || n < 1 || n > MaxNewDevices {
		http.Error(w, fmt.Sprintf("n: want 1..%d", MaxNewDevices), http.StatusBadRequest)
		return
	}
	if v := q.Get("after_revision"); v != "" {
		rev, err := strconv.ParseInt(v, 10, 64)
		if err != nil || rev < 0 {
			http.Error(w, "after_revision: want a store revision", http.StatusBadRequest)
			return
		}
		if err := s.waitApplied(r.Context(), rev); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	out, err := s.AddDevices(r.Context(), n)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	writeJSONResponse(w, out)
}

// waitApplied waits until control has applied store revision rev.
func (s *System) waitApplied(ctx context.Context, rev int64) error {
	if s.ctrl == nil { // not started (FuzzChaosQueries' system)
		return errClosed
	}
	ctx, cancel := context.WithTimeout(ctx, applyWait)
	defer cancel()
	return s.ctrl.WaitApplied(ctx, rev)
}
