package up

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
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

// AddDevices bootstraps n new devices now (each a new app session: a new
// device ID, routing.Bootstrap against the control plane) and starts their
// traffic; they join the population until Close.
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
	for _, d := range devs {
		s.devices = append(s.devices, d)
		s.wg.Add(1)
		go func() { defer s.wg.Done(); d.run(s.runCtx, s.env) }()
	}
	return out, nil
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
