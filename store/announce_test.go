package store

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseAnnouncement(t *testing.T) {
	for _, tt := range []struct {
		in string
		ok bool
	}{
		{`{"name":"gw","admin":"http://10.0.0.5:8444","started":"2026-12-02T03:00:00Z","pid":7}`, true},
		{`{"name":"gw","admin":"http://x","routes":[{"name":"api","clusters":["v1","v2"]}]}`, true},
		{`{"name":"gw","admin":"http://x","routes":[{"name":"api","clusters":[` + strings.Repeat(`"c",`, MaxAnnouncedClusters) + `"c"]}]}`, false},
		{`{"name":"gw","admin":"http://x","routes":[` + strings.Repeat(`{"name":"r"},`, MaxAnnouncedRoutes) + `{"name":"r"}]}`, false},
		{`{"name":"gw"}`, false},
		{`{"admin":"http://x"}`, false},
		{`not json`, false},
	} {
		_, err := ParseAnnouncement([]byte(tt.in))
		if (err == nil) != tt.ok {
			t.Errorf("ParseAnnouncement(%s): err %v, want ok=%v", tt.in, err, tt.ok)
		}
	}
}

func FuzzParseAnnouncement(f *testing.F) {
	f.Add([]byte(`{"name":"gw","admin":"http://10.0.0.5:8444","started":"2026-12-02T03:00:00Z"}`))
	f.Add([]byte(`{"name":"","admin":""}`))
	f.Add([]byte(`{"name":"gw","admin":"http://x","routes":[{"name":"api","clusters":["v1"]}],"truncated":true}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ParseAnnouncement(b)
		if err != nil {
			return
		}
		if a.Name == "" || a.Admin == "" {
			t.Fatalf("accepted %q without name or admin", b)
		}
		out, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseAnnouncement(out); err != nil {
			t.Fatalf("re-encoded %s does not parse: %v", out, err)
		}
	})
}
