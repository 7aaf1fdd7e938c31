package lmtest

import (
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"
)

// The scheduling API's wire schema (docs/md), written out here
// independently of package lastmile, as the control plane will: tests then
// check that both sides agree on the JSON, not on shared Go types.
type (
	// ScheduleRequest is what the client POSTs.
	ScheduleRequest struct {
		Version   int      `json:"version"`
		Domain    string   `json:"domain"`
		Client    string   `json:"client"`
		Protocols []string `json:"protocols"`
	}
	// ScheduleResponse is what the service answers.
	ScheduleResponse struct {
		Version    int          `json:"version"`
		TTLSeconds int          `json:"ttl_seconds"`
		Nodes      []AccessNode `json:"nodes"`
	}
	// AccessNode is one node of a response.
	AccessNode struct {
		Addr       string   `json:"addr"`
		ServerName string   `json:"server_name,omitempty"`
		Protocols  []string `json:"protocols,omitempty"`
	}
)

// ScheduleVersion is the schema version served.
const ScheduleVersion = 1

// Scheduler is a scheduling-service ("access-ctrl") handler speaking the
// schema of docs/md. Serve it from a Node to get HTTP/3 and HTTP/2.
type Scheduler struct {
	mu    sync.Mutex
	resp  ScheduleResponse
	down  atomic.Bool
	asked atomic.Int64
	last  ScheduleRequest
}

// NewScheduler returns a handler answering every request with nodes and ttl.
func NewScheduler(ttlSeconds int, nodes ...AccessNode) *Scheduler {
	return &Scheduler{resp: ScheduleResponse{Version: ScheduleVersion, TTLSeconds: ttlSeconds, Nodes: nodes}}
}

// SetDown makes the handler answer 503 when on.
func (s *Scheduler) SetDown(on bool) { s.down.Store(on) }

// Asked is the number of schedule requests received.
func (s *Scheduler) Asked() int64 { return s.asked.Load() }

// Last is the last request received.
func (s *Scheduler) Last() ScheduleRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

func (s *Scheduler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.asked.Add(1)
	if s.down.Load() {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	var req ScheduleRequest
	if r.Method != http.MethodPost || json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req) != nil ||
		req.Version != ScheduleVersion || req.Domain == "" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.last = req
	resp := s.resp
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}
