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
		err = a.Check(req.Subject(), clk.Now()) // bound to this device, not expired
	}
	if err == nil {
		if cfg.StateFile != "" {
			if werr := save(cfg.StateFile, body, clk.Now()); werr != nil {
				log.Warn("routing: cannot persist the answer", "file", cfg.StateFile, "err", werr)
			}
		}
		a.Backups = backupsFor(a.Primary, a.Backups, cfg)
		return Result{Answer: a, Source: SourceService}, nil
	}
	log.Warn("routing: service unavailable, falling back", "err", err)
	if cfg.StateFile != "" {
		p, perr := load(cfg.StateFile, keys, req.Subject(), clk.Now())
		switch {
		case perr != nil:
			log.Warn("routing: ignoring the persisted answer", "file", cfg.StateFile, "err", perr)
		case clk.Now().Before(p.received.Add(time.Duration(p.answer.TTLSeconds) * time.Second)):
			p.answer.Backups = backupsFor(p.answer.Primary, p.answer.Backups, cfg)
			return Result{Answer: p.answer, Source: SourcePersisted, Err: err}, nil
		}
	}
	return Result{Answer: Answer{Primary: cfg.DefaultDomain, Backups: backupsFor(cfg.DefaultDomain, nil, cfg), Rule: "fallback"}, Source: SourceDefault, Err: err}, nil
}

// backupsFor keeps an answer's backups; when it has none (an older service,
// a table without a second site), the configured default backups stand in,
// never the primary, and when those are empty too the default domain: a
// Result always carries a backup for failover.Config when the config allows
// one (DefaultDomain is its only domain otherwise).
func backupsFor(primary string, backups []string, cfg Config) []string {
	if len(backups) > 0 {
		return backups
	}
	out := []string{}
	for _, d := range cfg.DefaultBackups {
		if d != primary && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	if len(out) == 0 && primary != cfg.DefaultDomain {
		out = append(out, cfg.DefaultDomain)
	}
	return out
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
