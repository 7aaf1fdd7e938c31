package lastmile

import (
	"encoding/json"
	"testing"

	"github.com/veerhq/veer/lastmile/lmtest"
	"github.com/veerhq/veer/routing/schedule"
)

// The wire schema written independently in lmtest parses with the one the
// client and the control plane share (routing/schedule).
func TestScheduleSchemaAgreesWithServerSide(t *testing.T) {
	b, err := json.Marshal(lmtest.ScheduleResponse{Version: lmtest.ScheduleVersion, TTLSeconds: 60,
		Nodes: []lmtest.AccessNode{{Addr: "192.0.2.1:443", ServerName: "a.example", Protocols: []string{"h2"}}}})
	must(t, err)
	r, err := schedule.ParseResponse(b)
	must(t, err)
	if r.TTLSeconds != 60 || r.Nodes[0].ServerName != "a.example" || r.Nodes[0].Offers("h3") || !r.Nodes[0].Offers("h2") {
		t.Fatalf("%+v", r)
	}
	var req lmtest.ScheduleRequest
	b, err = json.Marshal(schedule.Request{Version: schedule.Version, Domain: "api.example", Client: "veer", Protocols: []string{"h3"}})
	must(t, err)
	must(t, json.Unmarshal(b, &req))
	if req.Domain != "api.example" || req.Version != 1 || req.Client != "veer" {
		t.Fatalf("%+v", req)
	}
}
