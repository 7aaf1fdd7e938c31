package store

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/veerhq/veer/clock"
)

// KeyDNSServersPrefix prefixes the private DNS servers' self-announcements
// (one document per running `veer dns` with a metrics listener, an
// Announcement whose Admin is that listener's base URL), read by the
// control plane's console for the access nodes' health. It is not under
// the dns/ documents the DNS servers follow.
const KeyDNSServersPrefix = "dns-servers/"

// DefaultAnnounceEvery is Announce's default heartbeat.
const DefaultAnnounceEvery = 10 * time.Second

// AnnounceOptions tune Announce; the zero value works.
type AnnounceOptions struct {
	// Every is how often the announcement is checked and written again
	// when missing or different; default DefaultAnnounceEvery.
	Every time.Duration
	// Clock; default clock.Real.
	Clock clock.Clock
	// Logger receives the store errors; default slog.Default().
	Logger *slog.Logger
	// Author of the writes; default "announce <name>".
	Author string
	// Reason of the writes; default "announce".
	Reason string
	// Refresh, when set, updates the announcement before each heartbeat's
	// check (a gateway's routes after a reload); Name and Admin stay.
	Refresh func(*Announcement)
}

// Announce writes a (as JSON) at key, re-writes it whenever a heartbeat
// finds it missing or different, and deletes it when ctx ends (a clean
// stop); it blocks until then. A steady announcer writes nothing: every
// write is kept in the key's history and the audit log, so liveness is
// read from the announced service itself, not from the document's age.
// Store errors are logged and retried at the next heartbeat; they never
// end it. It returns an error only for an announcement without Name or
// Admin.
func Announce(ctx context.Context, s Store, key string, a Announcement, opts AnnounceOptions) error {
	if a.Name == "" || a.Admin == "" {
		return errors.New("announce: name and admin are required")
	}
	log := cmp.Or(opts.Logger, slog.Default())
	if _, err := json.Marshal(a); err != nil {
		return err
	}
	w := Write{Author: cmp.Or(opts.Author, "announce "+a.Name), Reason: cmp.Or(opts.Reason, "announce")}
	check := func() {
		if opts.Refresh != nil {
			opts.Refresh(&a)
		}
		body, err := json.Marshal(a)
		if err != nil {
			log.Warn("announce: cannot encode the announcement", "key", key, "err", err)
			return
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		d, err := s.Get(cctx, key)
		if err == nil && bytes.Equal(d.Value, body) {
			return
		}
		if err != nil && !errors.Is(err, ErrNotFound) {
			log.Warn("announce: store read failed; retrying at the next heartbeat", "key", key, "err", err)
			return
		}
		if _, err := s.Put(cctx, key, body, w); err != nil {
			log.Warn("announce: store write failed; retrying at the next heartbeat", "key", key, "err", err)
			return
		}
		log.Info("announced to the control store", "key", key, "admin", a.Admin)
	}
	t := clock.Or(opts.Clock).NewTicker(cmp.Or(opts.Every, DefaultAnnounceEvery))
	defer t.Stop()
	check()
	for {
		select {
		case <-t.C():
			check()
		case <-ctx.Done():
			dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			err := s.Delete(dctx, key, Write{Author: w.Author, Reason: "stopped"})
			cancel()
			if err != nil && !errors.Is(err, ErrNotFound) {
				log.Warn("announce: could not delete the announcement on stop", "key", key, "err", err)
			}
			return nil
		}
	}
}
