package store

import (
	"encoding/json"
	"fmt"
	"time"
)

// KeyGatewaysPrefix prefixes the gateways' self-announcements (one
// document per running gateway, written by gateway.Announce, read by the
// control plane's console). It is not under KeyGatewayPrefix, so that the
// gateways' own followers never see each other's announcements.
const KeyGatewaysPrefix = "gateways/"

// Announcement is the document a gateway writes under KeyGatewaysPrefix:
// where its admin listener answers (GET /metrics, /readyz), so that the
// control plane can read its live state.
type Announcement struct {
	// Name identifies the gateway (host name and admin address by default).
	Name string `json:"name"`
	// Admin is the admin listener's base URL, e.g. http://10.0.0.5:8444.
	Admin string `json:"admin"`
	// Started is when the gateway process started announcing.
	Started time.Time `json:"started"`
	// PID is the gateway's process ID on its host.
	PID int `json:"pid,omitempty"`
	// Routes are the gateway's routes and their clusters as it runs them
	// (at most MaxAnnouncedRoutes routes of at most MaxAnnouncedClusters
	// clusters each; Truncated says some were left out), so that the
	// control plane can refuse a rollout naming a route or a cluster the
	// gateway lacks. Nil (absent): the gateway did not say (an older one);
	// a gateway without routes announces an empty list.
	Routes []AnnouncedRoute `json:"routes"`
	// Truncated: Routes (or a route's Clusters) left some out.
	Truncated bool `json:"truncated,omitempty"`
}

// Bounds of an announcement's Routes: a gateway with more announces the
// first ones and Truncated.
const (
	MaxAnnouncedRoutes   = 1000
	MaxAnnouncedClusters = 64
)

// AnnouncedRoute is one route of an announcing gateway.
type AnnouncedRoute struct {
	Name     string   `json:"name"`
	Clusters []string `json:"clusters"`
}

// Route returns the announced route named name; ok false when the
// announcement does not list it.
func (a Announcement) Route(name string) (AnnouncedRoute, bool) {
	for _, r := range a.Routes {
		if r.Name == name {
			return r, true
		}
	}
	return AnnouncedRoute{}, false
}

// ParseAnnouncement decodes an announcement; Name and Admin are required,
// Routes and their Clusters are bounded (MaxAnnouncedRoutes,
// MaxAnnouncedClusters).
func ParseAnnouncement(b []byte) (Announcement, error) {
	var a Announcement
	if err := json.Unmarshal(b, &a); err != nil {
		return a, fmt.Errorf("announcement: %w", err)
	}
	if a.Name == "" || a.Admin == "" {
		return a, fmt.Errorf("announcement: name and admin are required")
	}
	if len(a.Routes) > MaxAnnouncedRoutes {
		return a, fmt.Errorf("announcement: routes: %d: at most %d", len(a.Routes), MaxAnnouncedRoutes)
	}
	for i, r := range a.Routes {
		if len(r.Clusters) > MaxAnnouncedClusters {
			return a, fmt.Errorf("announcement: routes[%d].clusters: %d: at most %d", i, len(r.Clusters), MaxAnnouncedClusters)
		}
	}
	return a, nil
}
