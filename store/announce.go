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
}

// ParseAnnouncement decodes an announcement strictly; Name and Admin are
// required.
func ParseAnnouncement(b []byte) (Announcement, error) {
	var a Announcement
	if err := json.Unmarshal(b, &a); err != nil {
		return a, fmt.Errorf("announcement: %w", err)
	}
	if a.Name == "" || a.Admin == "" {
		return a, fmt.Errorf("announcement: name and admin are required")
	}
	return a, nil
}
