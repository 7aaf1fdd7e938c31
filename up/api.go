package up

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"time"

	"github.com/veerhq/veer/internal/atomicfile"
)

// The API of a running `veer up` (loopback): GET /v1/stats (a Snapshot)
// and GET /v1/state (the State), which `veer chaos` reads; POST
// /v1/fault/public-dns?mode=hijack|normal and POST /v1/network-changed,
// which it uses for the faults no signal can make.
func (s *System) serveAPI() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/stats", func(w http.ResponseWriter, _ *http.Request) { writeJSONResponse(w, s.Stats()) })
	mux.HandleFunc("GET /v1/state", func(w http.ResponseWriter, _ *http.Request) { writeJSONResponse(w, s.State()) })
	// faults that have no process to signal: the public resolver turns
	// hijacker (or back), and the population changes networks
	mux.HandleFunc("POST /v1/fault/public-dns", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("mode") {
		case "hijack":
			s.public.hijack.Store(true)
		case "normal":
			s.public.hijack.Store(false)
		default:
			http.Error(w, "mode: hijack or normal", http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /v1/network-changed", func(w http.ResponseWriter, _ *http.Request) {
		for _, d := range s.devs() {
			d.networkChanged()
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /v1/devices", s.handleAddDevices)
	mux.HandleFunc("DELETE /v1/devices", s.handleRetireDevices) // newdevices.go
	mux.HandleFunc("POST /v1/fault/overload", s.handleOverload)
	mux.HandleFunc("POST /v1/fault/limited", s.handleLimited) // engines_load.go
	mux.HandleFunc("GET /v1/usage", s.handleUsage)            // soak.go
	mux.HandleFunc("POST /v1/fault/async", s.handleAsyncBurst)
	mux.HandleFunc("GET /v1/async", func(w http.ResponseWriter, _ *http.Request) { writeJSONResponse(w, s.Async()) })
	mux.HandleFunc("POST /v1/fault/release-load", s.handleReleaseLoad)
	mux.HandleFunc("GET /v1/release-load", func(w http.ResponseWriter, _ *http.Request) { writeJSONResponse(w, s.ReleaseLoad()) })
	mux.HandleFunc("GET /debug/pprof/", pprof.Index) // heap, goroutine, ... of the veer up process
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	s.api = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.api.Serve(ln) }()
	s.mu.Lock()
	s.state.API = ln.Addr().String()
	s.mu.Unlock()
	return nil
}

func writeJSONResponse(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(path, append(b, '\n'))
}

// ErrNotRunning: no `veer up` runs with that data directory.
var ErrNotRunning = errors.New("up: no veer up running")

// ReadState reads the state file of a `veer up` running with dataDir and
// checks that its process is alive and its API answers. A state file that
// does not parse is reported with its path.
func ReadState(dataDir string) (State, error) {
	path := filepath.Join(dataDir, StateFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return State{}, fmt.Errorf("%w: no %s", ErrNotRunning, path)
	}
	if err != nil {
		return State{}, err
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return State{}, fmt.Errorf("%s: %w", path, err)
	}
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + st.API + "/v1/state")
	if err != nil {
		return State{}, fmt.Errorf("%w: %s names pid %d, API %s: %v", ErrNotRunning, path, st.PID, st.API, err)
	}
	defer resp.Body.Close()
	var live State
	if err := json.NewDecoder(resp.Body).Decode(&live); err != nil {
		return State{}, fmt.Errorf("%s/v1/state: %w", st.API, err)
	}
	return live, nil
}
