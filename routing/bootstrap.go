package routing

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/veerhq/veer/clock"
)

// Sources of a Result.
const (
	SourceService   = "service"
	SourcePersisted = "persisted"
	SourceDefault   = "default"
)

// Result is what the app uses for its session.
type Result struct {
	Answer
	// Source says where the answer came from: SourceService,
	// SourcePersisted or SourceDefault.
	Source string
	// Err is why the service's answer was not used (nil for
	// SourceService).
	Err error
}

// Domains returns the primary followed by the backups, for failover.Config.
func (r Result) Domains() []string {
	return append([]string{r.Primary}, r.Backups...)
}

// Bootstrap asks the routing service for the session's domains once per
// launch; see the package doc for the fallbacks. The error is non-nil only
// when cfg is invalid.
func Bootstrap(ctx context.Context, cfg Config, req Request, opts Options) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	cfg = cfg.withDefaults()
	clk := clock.Or(opts.Clock)
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	keys := cfg.keys()
	body, a, err := ask(ctx, cfg, req, opts.Client, keys)
	if err == nil {
		err = a.Check(req.DeviceID, clk.Now()) // bound to this device, not expired
	}
	if err == nil {
		if cfg.StateFile != "" {
			if werr := save(cfg.StateFile, body, clk.Now()); werr != nil {
				log.Warn("routing: cannot persist the answer", "file", cfg.StateFile, "err", werr)
			}
		}
		return Result{Answer: a, Source: SourceService}, nil
	}
	log.Warn("routing: service unavailable, falling back", "err", err)
	if cfg.StateFile != "" {
		p, perr := load(cfg.StateFile, keys, req.DeviceID, clk.Now())
		switch {
		case perr != nil:
			log.Warn("routing: ignoring the persisted answer", "file", cfg.StateFile, "err", perr)
		case clk.Now().Before(p.received.Add(time.Duration(p.answer.TTLSeconds) * time.Second)):
			return Result{Answer: p.answer, Source: SourcePersisted, Err: err}, nil
		}
	}
	return Result{Answer: Answer{Primary: cfg.DefaultDomain, Backups: slices.Clone(cfg.DefaultBackups), Rule: "fallback"}, Source: SourceDefault, Err: err}, nil
}

func ask(ctx context.Context, cfg Config, req Request, client *http.Client, keys []ed25519.PublicKey) ([]byte, Answer, error) {
	if client == nil {
		client = http.DefaultClient
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	payload, err := json.Marshal(req)
	if err != nil {
		return nil, Answer{}, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.URL, bytes.NewReader(payload))
	if err != nil {
		return nil, Answer{}, err
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(hr)
	if err != nil {
		return nil, Answer{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBody+1))
	if err != nil {
		return nil, Answer{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, Answer{}, fmt.Errorf("routing: HTTP status %d", resp.StatusCode)
	}
	a, err := Verify(body, keys)
	return body, a, err
}
