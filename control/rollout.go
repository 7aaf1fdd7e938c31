package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/release"
	"github.com/veerhq/veer/store"
)

// DefaultRolloutInterval is how often the control plane judges the running
// rollouts on the gateways' pooled counts (the gateways publish theirs
// every second too).
const DefaultRolloutInterval = time.Second

// rolloutAuthor is the author of the writes the analysis loop makes.
const rolloutAuthor = "control rollout analysis"

// ErrRolloutActive: a rollout already moves the route's traffic.
var ErrRolloutActive = errors.New("control: a rollout is active on the route")

// RolloutRequest is the body of POST /v1/admin/rollouts/{route}.
type RolloutRequest struct {
	// Action is start, pause, resume or abort.
	Action string `json:"action"`
	// Plan is the release plan (start only; its route defaults to the
	// path's). Durations may be written "5m".
	Plan json.RawMessage `json:"plan,omitempty"`
	// Reason is recorded in the audit log (default the X-Veer-Reason
	// header).
	Reason string `json:"reason,omitempty"`
}

// RolloutStatus is GET /v1/admin/rollouts/{route}: the rollout, the
// gateways' counts of its current step pooled, and the verdict the
// analysis would give now.
type RolloutStatus struct {
	Rollout  release.Rollout `json:"rollout"`
	Version  int64           `json:"version"`
	Gateways int             `json:"gateways"`
	A        release.Counts  `json:"a"`
	B        release.Counts  `json:"b"`
	Verdict  release.Verdict `json:"verdict"`
	// Warnings (start only): what could not be checked, e.g. that no
	// gateway was announced to check the plan's route and clusters on.
	Warnings []string `json:"warnings,omitempty"`
}

// checkPlanGateways checks the plan's route and clusters against the
// routes every announced gateway runs (store.KeyGatewaysPrefix): a route
// or cluster a gateway lacks is an error naming the plan's field and the
// gateway. What cannot be checked (no gateway announced, an announcement
// without routes or truncated) is a warning, and the plan is accepted.
func (s *Service) checkPlanGateways(ctx context.Context, p release.Plan) (warnings []string, err error) {
	docs, _, err := s.st.List(ctx, store.KeyGatewaysPrefix)
	if err != nil {
		return nil, err
	}
	var errs []error
	checked := 0
	for _, d := range docs {
		a, err := store.ParseAnnouncement(d.Value)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("%s: unreadable announcement, not checked: %v", d.Key, err))
			continue
		}
		if a.Routes == nil {
			warnings = append(warnings, fmt.Sprintf("gateway %s announces no routes (an older gateway): the plan is not checked against it", a.Name))
			continue
		}
		checked++
		rt, ok := a.Route(p.Route)
		if !ok {
			if a.Truncated {
				warnings = append(warnings, fmt.Sprintf("gateway %s announces only its first %d routes, not %q: not checked", a.Name, len(a.Routes), p.Route))
				continue
			}
			errs = append(errs, config.Field("plan.route", "%q is not a route of gateway %s", p.Route, a.Name))
			continue
		}
		for _, f := range []struct{ field, cluster string }{{"plan.from", p.From}, {"plan.to", p.To}} {
			if !slices.Contains(rt.Clusters, f.cluster) {
				if len(rt.Clusters) == store.MaxAnnouncedClusters && a.Truncated {
					warnings = append(warnings, fmt.Sprintf("gateway %s announces only the first %d clusters of route %q, not %q: not checked", a.Name, len(rt.Clusters), p.Route, f.cluster))
					continue
				}
				errs = append(errs, config.Field(f.field, "cluster %q is not a cluster of route %q on gateway %s", f.cluster, p.Route, a.Name))
			}
		}
	}
	if checked == 0 {
		warnings = append(warnings, "no gateway announced under "+store.KeyGatewaysPrefix+": the plan's route and clusters are not checked")
	}
	return warnings, errors.Join(errs...)
}

func rolloutKey(route string) string { return release.KeyPrefix + route }

// getRollout reads the route's rollout; found false when there is none.
func (s *Service) getRollout(ctx context.Context, route string) (release.Rollout, store.Doc, bool, error) {
	d, err := s.st.Get(ctx, rolloutKey(route))
	if errors.Is(err, store.ErrNotFound) {
		return release.Rollout{}, d, false, nil
	}
	if err != nil {
		return release.Rollout{}, d, false, err
	}
	r, err := release.ParseRollout(d.Value, d.Key)
	return r, d, true, err
}

// pooled adds up the gateways' published counts of r's current step.
func (s *Service) pooled(ctx context.Context, r release.Rollout) (a, b release.Counts, n int, err error) {
	byGateway, err := s.stepCounts(ctx, r.Plan.Route)
	if err != nil {
		return a, b, 0, err
	}
	all := make([]release.StepCounts, 0, len(byGateway))
	for _, c := range byGateway {
		all = append(all, c)
	}
	a, b, n = release.Pool(all, r.ID, r.Serving())
	return a, b, n, nil
}

// stepCounts reads the counts the gateways published for route, by
// gateway name.
func (s *Service) stepCounts(ctx context.Context, route string) (map[string]release.StepCounts, error) {
	prefix := release.CountsPrefix + route + "/"
	docs, _, err := s.st.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	out := make(map[string]release.StepCounts, len(docs))
	for _, d := range docs {
		var c release.StepCounts
		if json.Unmarshal(d.Value, &c) != nil {
			s.log.Warn("rollout counts ignored: not JSON", "key", d.Key)
			continue
		}
		out[strings.TrimPrefix(d.Key, prefix)] = c
	}
	return out, nil
}

// drainDone is release.DrainDone on the announced gateways and their
// published counts.
func (s *Service) drainDone(ctx context.Context, r release.Rollout, now time.Time) (bool, string, error) {
	counts, err := s.stepCounts(ctx, r.Plan.Route)
	if err != nil {
		return false, "", err
	}
	docs, _, err := s.st.List(ctx, store.KeyGatewaysPrefix)
	if err != nil {
		return false, "", err
	}
	var gws []string
	for _, d := range docs {
		if a, err := store.ParseAnnouncement(d.Value); err == nil {
			gws = append(gws, a.Name)
		}
	}
	done, why := release.DrainDone(r, gws, counts, now)
	return done, why, nil
}

// writeRollout writes r over the version read (If-Match), audited.
func (s *Service) writeRollout(ctx context.Context, r release.Rollout, expect int64, author, reason string) (store.Doc, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return store.Doc{}, err
	}
	return s.st.Put(ctx, rolloutKey(r.Plan.Route), body, store.Write{Expect: expect, Author: author, Reason: reason})
}

// JudgeRollouts runs the analysis once at now: every running rollout is
// judged on its current step's pooled counts and, on a decision, written
// back with the verdict's reason (If-Match on the version read, so an
// operator's action in between wins). It returns the rollouts it changed.
func (s *Service) JudgeRollouts(ctx context.Context, now time.Time) ([]release.Rollout, error) {
	docs, _, err := s.st.List(ctx, release.KeyPrefix)
	if err != nil {
		return nil, err
	}
	var changed []release.Rollout
	var errs []error
	for _, d := range docs {
		r, err := release.ParseRollout(d.Value, d.Key)
		if err != nil {
			s.log.Warn("rollout document ignored", "key", d.Key, "err", err)
			continue
		}
		if r.Status != release.Running {
			continue
		}
		if r.Draining {
			done, why, err := s.drainDone(ctx, r, now)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if !done {
				continue
			}
			next := r.EndDrain(now, why)
			if _, err := s.writeRollout(ctx, next, d.Version, rolloutAuthor, next.Reason); err != nil {
				if !errors.Is(err, store.ErrConflict) {
					errs = append(errs, err)
				}
				continue
			}
			s.log.Info("rollout drain over", "route", r.Plan.Route, "id", r.ID, "reason", next.Reason)
			changed = append(changed, next)
			continue
		}
		a, b, _, err := s.pooled(ctx, r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		v := r.Judge(a, b, now)
		if v.Decision == release.Continue {
			continue
		}
		next := r.Apply(v, now)
		if _, err := s.writeRollout(ctx, next, d.Version, rolloutAuthor, next.Reason); err != nil {
			if !errors.Is(err, store.ErrConflict) {
				errs = append(errs, err)
			}
			continue
		}
		s.log.Info("rollout "+v.Decision.String(), "route", r.Plan.Route, "id", r.ID, "step", r.Step, "status", next.Status, "reason", next.Reason)
		changed = append(changed, next)
	}
	return changed, errors.Join(errs...)
}

// runRollouts runs JudgeRollouts at every tick of t (the service's clock,
// Options.RolloutInterval) until ctx ends. Start makes t before it
// returns, so that a test's virtual clock finds it.
func (s *Service) runRollouts(ctx context.Context, t clock.Ticker) {
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		if _, err := s.JudgeRollouts(ctx, s.clk.Now()); err != nil && ctx.Err() == nil {
			s.log.Warn("rollout analysis failed; retrying at the next tick", "err", err)
		}
	}
}

// getRolloutAPI serves GET /v1/admin/rollouts/{route}.
func (s *Service) getRolloutAPI(w http.ResponseWriter, r *http.Request, _ principal) {
	ro, d, found, err := s.getRollout(r.Context(), r.PathValue("route"))
	if err != nil {
		storeError(w, err)
		return
	}
	if !found {
		httpError(w, http.StatusNotFound, "no rollout of route "+strconv.Quote(r.PathValue("route")))
		return
	}
	st := RolloutStatus{Rollout: ro, Version: d.Version}
	if st.A, st.B, st.Gateways, err = s.pooled(r.Context(), ro); err != nil {
		storeError(w, err)
		return
	}
	st.Verdict = ro.Judge(st.A, st.B, s.clk.Now())
	if ro.Draining && ro.Active() {
		_, why, err := s.drainDone(r.Context(), ro, s.clk.Now())
		if err != nil {
			storeError(w, err)
			return
		}
		st.Verdict = release.Verdict{Reason: "draining " + ro.Plan.To + ": " + why}
	}
	w.Header().Set("ETag", strconv.Quote(strconv.FormatInt(d.Version, 10)))
	writeJSON(w, http.StatusOK, st)
}

// postRolloutAPI serves POST /v1/admin/rollouts/{route}: start, pause,
// resume or abort, audited with the reason.
func (s *Service) postRolloutAPI(w http.ResponseWriter, r *http.Request, p principal) {
	route := r.PathValue("route")
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var req RolloutRequest
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		httpError(w, http.StatusBadRequest, "rollout request: "+err.Error())
		return
	}
	reason := req.Reason
	if reason == "" {
		reason = r.Header.Get("X-Veer-Reason")
	}
	now := s.clk.Now()
	cur, d, found, err := s.getRollout(r.Context(), route)
	if err != nil && !found {
		storeError(w, err)
		return
	}
	if err != nil { // unreadable: only a start may replace it
		s.log.Warn("rollout document unreadable; a start replaces it", "route", route, "err", err)
		cur, found = release.Rollout{}, false
	}
	var next release.Rollout
	var warnings []string
	expect := store.Absent
	if d.Version > 0 {
		expect = d.Version
	}
	switch req.Action {
	case "start":
		if found && cur.Active() {
			httpError(w, http.StatusConflict, fmt.Sprintf("%v: %s (id %s, step %d, %s): abort it first", ErrRolloutActive, route, cur.ID, cur.Step, cur.Status))
			return
		}
		plan := release.Plan{Route: route}
		if len(req.Plan) == 0 {
			httpError(w, http.StatusBadRequest, "plan: required to start")
			return
		}
		if err := config.Parse(req.Plan, "plan", &plan); err != nil {
			httpError(w, http.StatusBadRequest, err.Error())
			return
		}
		if plan.Route != route {
			httpError(w, http.StatusBadRequest, config.Field("plan.route", "%q: not the path's route %q", plan.Route, route).Error())
			return
		}
		if next, err = release.Start(plan, now, reason); err != nil {
			httpError(w, http.StatusBadRequest, err.Error())
			return
		}
		if warnings, err = s.checkPlanGateways(r.Context(), plan); err != nil {
			var fe *config.FieldError
			if !errors.As(err, &fe) {
				storeError(w, err)
				return
			}
			httpError(w, http.StatusBadRequest, err.Error())
			return
		}
	case string(release.Pause), string(release.Resume), string(release.Cancel):
		if !found {
			httpError(w, http.StatusNotFound, "no rollout of route "+strconv.Quote(route))
			return
		}
		if next, err = cur.Do(release.Control(req.Action), now, reason); err != nil {
			httpError(w, http.StatusConflict, err.Error())
			return
		}
	default:
		httpError(w, http.StatusBadRequest, config.Field("action", "%q: want start, pause, resume or abort", req.Action).Error())
		return
	}
	nd, err := s.writeRollout(r.Context(), next, expect, p.name, fmt.Sprintf("rollout %s: %s", req.Action, reason))
	if err != nil {
		storeError(w, err)
		return
	}
	w.Header().Set("ETag", strconv.Quote(strconv.FormatInt(nd.Version, 10)))
	for _, w := range warnings {
		s.log.Warn("rollout started unchecked", "route", route, "warning", w)
	}
	writeJSON(w, http.StatusOK, RolloutStatus{Rollout: next, Version: nd.Version, Warnings: warnings})
}
