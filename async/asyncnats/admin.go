package asyncnats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/veerhq/veer/async"
)

// Depth implements async.Engine: the pending and unacknowledged counts of
// the group's tenant consumers, and the stream time of the oldest
// unacknowledged message among them.
func (e *Engine) Depth(ctx context.Context, group string) (uint64, time.Time, error) {
	// packed submissions not distributed yet (the distributor keeps this
	// short): the group's members of the first maxDepthScan waiting
	// ingest packs. Read before the tenant queues, so that one moved
	// between the two reads counts twice for a moment, never zero times.
	var n uint64
	var oldest time.Time
	ci, err := e.stream.Consumer(ctx, ingestConsumer)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("asyncnats: %w: %w", async.ErrUnavailable, err)
	}
	info, err := ci.Info(ctx)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("asyncnats: %w: %w", async.ErrUnavailable, err)
	}
	seq := info.AckFloor.Stream + 1
	for range min(info.NumPending+uint64(info.NumAckPending), maxDepthScan) {
		raw, err := e.stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(ingestSubject))
		if err != nil {
			break
		}
		seq = raw.Sequence + 1
		invs, err := decodeAll(raw.Sequence, raw.Header, raw.Data)
		if err != nil {
			continue
		}
		for _, inv := range invs {
			if inv.Group == group {
				n++
				if oldest.IsZero() || raw.Time.Before(oldest) {
					oldest = raw.Time
				}
			}
		}
	}
	tenants, err := e.Tenants(ctx, group)
	if err != nil {
		return 0, time.Time{}, err
	}
	for _, t := range tenants { // a tenant no worker has fetched for yet (paused, new) has no consumer
		if _, err := e.consumer(ctx, group, t); err != nil {
			return 0, time.Time{}, err
		}
	}
	prefix := "veer-" + group + "-"
	lister := e.stream.ListConsumers(ctx)
	for ci := range lister.Info() {
		if !strings.HasPrefix(ci.Name, prefix) {
			continue
		}
		waiting := ci.NumPending + uint64(ci.NumAckPending)
		if waiting == 0 {
			continue
		}
		n += waiting
		raw, err := e.stream.GetMsg(ctx, ci.AckFloor.Stream+1, jetstream.WithGetMsgSubject(ci.Config.FilterSubject))
		if err == nil && (oldest.IsZero() || raw.Time.Before(oldest)) {
			oldest = raw.Time
		}
	}
	if err := lister.Err(); err != nil {
		return 0, time.Time{}, fmt.Errorf("asyncnats: %w: %w", async.ErrUnavailable, err)
	}
	return n, oldest, nil
}

const maxDepthScan = 64

// deadRecord is a dead letter's data.
type deadRecord struct {
	Invocation *async.Invocation `json:"invocation"`
	Status     async.Status      `json:"status"`
}

// Replay implements async.Engine.
func (e *Engine) Replay(ctx context.Context, group string, max int) ([]string, error) {
	var ids []string
	// the dead letters there are now: a replayed one that fails again at
	// once is dead-lettered anew while this runs, and is not replayed again
	info, err := e.dead.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("asyncnats: %w: %w", async.ErrUnavailable, err)
	}
	last := info.State.LastSeq
	seq := uint64(1)
	for len(ids) < max {
		raw, err := e.dead.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(deadBase+group))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return ids, fmt.Errorf("asyncnats: %w: %w", async.ErrUnavailable, err)
		}
		if raw.Sequence > last {
			break
		}
		seq = raw.Sequence + 1
		var rec deadRecord
		if err := json.Unmarshal(raw.Data, &rec); err != nil || rec.Invocation == nil {
			e.log.Warn("asyncnats: unreadable dead letter skipped", "seq", raw.Sequence, "err", err)
			continue
		}
		inv := *rec.Invocation
		inv.ID = ""
		id, _, err := e.enqueue(ctx, &inv, false)
		if err != nil {
			return ids, err
		}
		st := rec.Status
		st.Reason += " (replayed as " + id + ")"
		_ = e.SetStatus(ctx, st)
		if err := e.dead.DeleteMsg(ctx, raw.Sequence); err != nil {
			e.log.Warn("asyncnats: replayed dead letter not removed", "seq", raw.Sequence, "err", err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// Purge implements async.Engine.
func (e *Engine) Purge(ctx context.Context, group, tenant string) error {
	tok, grp := "*", "*"
	if tenant != "" || group == "" {
		tok = async.TenantToken(tenant)
	}
	if group != "" {
		grp = group
	}
	info, err := e.stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("asyncnats: purge: %w: %w", async.ErrUnavailable, err)
	}
	// the marks first: packed submissions up to here are no longer
	// distributed nor found, whichever side of the purge they are on
	groups := []string{group}
	if group == "" {
		groups = groups[:0]
		for _, g := range e.cfg.Groups {
			groups = append(groups, g.Name)
		}
	}
	for _, g := range groups {
		if err := e.markPurged(ctx, g, tenant, info.State.LastSeq); err != nil {
			return fmt.Errorf("asyncnats: purge: %w: %w", async.ErrUnavailable, err)
		}
	}
	if err := e.stream.Purge(ctx, jetstream.WithPurgeSubject(subjectBase+tok+"."+grp)); err != nil {
		return fmt.Errorf("asyncnats: purge: %w: %w", async.ErrUnavailable, err)
	}
	return nil
}
