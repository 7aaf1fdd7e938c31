package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/store"
)

// Playbook is one operation (POST /v1/admin/playbook).
type Playbook struct {
	// Action is site_down, site_up, cluster_down, cluster_up,
	// emergency_set or emergency_clear.
	Action string `json:"action"`
	// Site for site_* and cluster_*; Cluster for cluster_*.
	Site    string `json:"site,omitempty"`
	Cluster string `json:"cluster,omitempty"`
	// Region scopes emergency_*; empty: global.
	Region string `json:"region,omitempty"`
	// Override is emergency_set's answer.
	Override *Override `json:"override,omitempty"`
	// Reason is recorded in the audit log.
	Reason string `json:"reason,omitempty"`
}

// ParsePlaybook decodes and checks a playbook body.
func ParsePlaybook(body []byte) (Playbook, error) {
	var p Playbook
	if err := strictJSON(body, &p); err != nil {
		return p, err
	}
	switch p.Action {
	case "site_down", "site_up":
		if p.Site == "" {
			return p, config.Field("site", "required")
		}
	case "cluster_down", "cluster_up":
		if p.Site == "" || p.Cluster == "" {
			return p, config.Field("cluster", "site and cluster are required")
		}
	case "emergency_set":
		if p.Override == nil {
			return p, config.Field("override", "required")
		}
		if err := p.Override.validate(); err != nil {
			return p, config.In("override", err)
		}
	case "emergency_clear":
	default:
		return p, config.Field("action", "%q: want site_down, site_up, cluster_down, cluster_up, emergency_set or emergency_clear", p.Action)
	}
	return p, nil
}

func (s *Service) playbook(w http.ResponseWriter, r *http.Request, p principal) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	pb, err := ParsePlaybook(body)
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	d, err := s.RunPlaybook(r.Context(), pb, p.name)
	var fe *config.FieldError
	switch {
	case errors.As(err, &fe):
		httpError(w, http.StatusBadRequest, err.Error())
	case err != nil:
		storeError(w, err)
	default:
		writeJSON(w, http.StatusOK, docInfo{d.Key, d.Version, d.Revision})
	}
}

// RunPlaybook applies a playbook as a read-modify-write of routing/state or
// routing/emergency, retrying when another writer got in between.
func (s *Service) RunPlaybook(ctx context.Context, pb Playbook, author string) (store.Doc, error) {
	key := KeyState
	if pb.Action == "emergency_set" || pb.Action == "emergency_clear" {
		key = KeyEmergency
	}
	for range 5 {
		cur, err := s.st.Get(ctx, key)
		expect := cur.Version
		switch {
		case errors.Is(err, store.ErrNotFound):
			cur.Value, expect = nil, store.Absent
		case err != nil:
			return store.Doc{}, err
		}
		next, err := modify(key, cur.Value, pb)
		if err != nil {
			return store.Doc{}, err
		}
		if doc, err := ValidateDocument(key, next); err != nil {
			return store.Doc{}, err
		} else if err := checkAgainstTable(doc, s.table()); err != nil {
			return store.Doc{}, err
		}
		d, err := s.st.Put(ctx, key, next, store.Write{Expect: expect, Author: author, Reason: pb.Action + ": " + pb.Reason})
		if !errors.Is(err, store.ErrConflict) {
			return d, err
		}
	}
	return store.Doc{}, fmt.Errorf("%w: %s kept changing", store.ErrConflict, key)
}

func modify(key string, raw []byte, pb Playbook) ([]byte, error) {
	if key == KeyEmergency {
		var e Emergency
		if raw != nil {
			if err := config.Parse(raw, key, &e); err != nil {
				return nil, err
			}
		}
		switch {
		case pb.Action == "emergency_set" && pb.Region == "":
			e.Global = pb.Override
		case pb.Action == "emergency_set":
			if e.Regions == nil {
				e.Regions = map[string]Override{}
			}
			e.Regions[pb.Region] = *pb.Override
		case pb.Region == "":
			e.Global = nil
		default:
			delete(e.Regions, pb.Region)
		}
		return json.Marshal(e)
	}
	var st State
	if raw != nil {
		if err := config.Parse(raw, key, &st); err != nil {
			return nil, err
		}
	}
	set := func(list []string, v string, on bool) []string {
		list = slices.DeleteFunc(list, func(x string) bool { return x == v })
		if on {
			list = append(list, v)
		}
		return list
	}
	switch pb.Action {
	case "site_down", "site_up":
		st.SitesDown = set(st.SitesDown, pb.Site, pb.Action == "site_down")
	default:
		st.ClustersDown = set(st.ClustersDown, pb.Site+"/"+pb.Cluster, pb.Action == "cluster_down")
	}
	return json.Marshal(st)
}
