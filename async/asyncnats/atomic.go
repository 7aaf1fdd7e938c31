package asyncnats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"

	"github.com/veerhq/veer/async"
)

// Atomic batch publishing (nats-server 2.12+, a stream with
// allow_atomic): the messages of one batch are committed together, and
// with sync always the server syncs them once (it coalesces the batch's
// writes into one flush) instead of once per message. The distributor
// uses it to write a round's per-tenant packs with one synced write; a
// server without it (Debian's 2.9) gets one publish per pack.
const (
	batchIDHeader     = "Nats-Batch-Id"
	batchSeqHeader    = "Nats-Batch-Sequence"
	batchCommitHeader = "Nats-Batch-Commit"
	// maxAtomicBatch is the server's default limit of messages in a batch.
	maxAtomicBatch = 1000
)

var errAtomic = errors.New("asyncnats: atomic batch refused")

// publishAtomic publishes msgs as one atomic batch and returns the stream
// sequence of the last (the batch's messages have consecutive sequences).
func (e *Engine) publishAtomic(ctx context.Context, msgs []*nats.Msg) (uint64, error) {
	id := "veer" + async.Nonce("", "") + async.Nonce("", "") // random, 36 characters (at most 64)
	for i, m := range msgs {
		if m.Header == nil {
			m.Header = nats.Header{}
		}
		m.Header.Set(batchIDHeader, id)
		m.Header.Set(batchSeqHeader, strconv.Itoa(i+1))
		if i < len(msgs)-1 {
			if err := e.nc.PublishMsg(m); err != nil {
				return 0, err
			}
		}
	}
	last := msgs[len(msgs)-1]
	last.Header.Set(batchCommitHeader, "1")
	resp, err := e.nc.RequestMsgWithContext(ctx, last)
	if err != nil {
		return 0, err
	}
	var ack struct {
		Seq   uint64 `json:"seq"`
		Count int    `json:"count"`
		Error *struct {
			Code        int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(resp.Data, &ack); err != nil {
		return 0, fmt.Errorf("%w: %w", errAtomic, err)
	}
	if ack.Error != nil {
		return 0, fmt.Errorf("%w: %d %s", errAtomic, ack.Error.Code, ack.Error.Description)
	}
	if ack.Count != len(msgs) {
		return 0, fmt.Errorf("%w: %d of %d messages committed", errAtomic, ack.Count, len(msgs))
	}
	return ack.Seq, nil
}
