package asyncnats

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/veerhq/veer/async"
)

// The distributor moves the members of ingest packs (one synced write for
// the submissions of many tenants) to their (tenant, group) subjects, so
// that consumption stays fair per tenant in the store. It runs in every
// engine over one durable consumer (several gateways on one cluster share
// the work). A round takes every ingest pack that is waiting (up to
// maxRound), publishes one pack per (tenant, group) subject, waits for all
// of those acknowledgements, and only then acknowledges the ingest packs:
// a crash in between delivers the ingest packs again, and their members are
// distributed twice (a worker that finds one already running elsewhere
// waits for it, see async.Service; one already finished is skipped).
const (
	ingestConsumer = "veer-ingest"
	maxRound       = 512
)

// OnReady sets f to be called with a group's name when invocations of the
// group became consumable (distributed from an ingest pack); async.Service
// uses it to wake the group's scheduler. f must not block.
func (e *Engine) OnReady(f func(group string)) {
	e.rmu.Lock()
	e.ready = f
	e.rmu.Unlock()
}

func (e *Engine) notifyReady(group string) {
	e.rmu.Lock()
	f := e.ready
	e.rmu.Unlock()
	if f != nil {
		f(group)
	}
}

// startDistributor creates the ingest consumer and runs the distributor
// until Close. It fetches only what is waiting (no prefetch that a closing
// engine would hold until the ack deadline): at once when this engine
// stored an ingest pack (kickDistributor), and every poll interval for
// the packs of other gateways on the cluster or left by a crash.
func (e *Engine) startDistributor(ctx context.Context) error {
	cons, err := e.stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: ingestConsumer, FilterSubject: ingestSubject,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: e.cfg.AckWait, MaxDeliver: -1,
		MaxAckPending: 4 * maxRound, DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return errors.Join(async.ErrUnavailable, err)
	}
	e.wg.Go(func() {
		t := time.NewTicker(e.cfg.PollInterval)
		defer t.Stop()
		for {
			select {
			case <-e.kick:
			case <-t.C:
			case <-e.stop:
				return
			}
			for { // until nothing waits
				batch, err := cons.FetchNoWait(maxRound)
				if err != nil {
					break
				}
				var round []jetstream.Msg
				for m := range batch.Messages() {
					round = append(round, m)
				}
				if len(round) == 0 {
					break
				}
				e.distributeRound(round)
				if e.distEvery > 0 {
					// let more ingest packs gather: fewer, larger per-tenant
					// packs, fewer synced writes beside the submissions'
					select {
					case <-time.After(e.distEvery):
					case <-e.stop:
						return
					}
				}
			}
		}
	})
	return nil
}

// kickDistributor makes the distributor look at once.
func (e *Engine) kickDistributor() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// out is one distributed pack to publish.
type out struct {
	subj  string
	group string
	data  []byte
	done  bool
}

// distributeRound distributes the members of the ingest packs in round.
func (e *Engine) distributeRound(round []jetstream.Msg) {
	bySubj := map[string][]packItem{}
	group := map[string]string{}
	var order []string
	var took []jetstream.Msg
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.SubmitTimeout)
	defer cancel()
	marks := map[string]uint64{}
	for _, m := range round {
		md, err := m.Metadata()
		if err != nil {
			_ = m.Term()
			continue
		}
		pack, err := decodePack(m.Headers(), m.Data())
		if err != nil {
			e.log.Warn("asyncnats: undecodable ingest pack dropped", "seq", md.Sequence.Stream, "err", err)
			_ = m.Term()
			continue
		}
		seq := md.Sequence.Stream
		for _, it := range pack {
			inv := it.Meta.Invocation
			if e.purgedAt(ctx, marks, inv.Group, inv.Tenant) >= seq {
				continue // purged before it was distributed
			}
			it.ID = async.FormatID(seq, it.Meta.Nonce)
			s := subject(inv.Tenant, inv.Group)
			if _, ok := bySubj[s]; !ok {
				order = append(order, s)
				group[s] = inv.Group
			}
			bySubj[s] = append(bySubj[s], it)
		}
		took = append(took, m)
	}
	var outs []*out
	for _, s := range order {
		items := bySubj[s]
		for len(items) > 0 {
			n, size := 0, 0
			for n < len(items) && n < maxPackItems && (n == 0 || size+len(items[n].Body) < maxPackBytes) {
				size += len(items[n].Body) + 512
				n++
			}
			data, err := encodePack(items[:n])
			if err != nil { // nothing is acknowledged: the round comes again
				e.log.Warn("asyncnats: distributed pack not encoded; trying again", "err", err)
				for _, m := range took {
					_ = m.NakWithDelay(time.Second)
				}
				return
			}
			outs = append(outs, &out{subj: s, group: group[s], data: data})
			items = items[n:]
		}
	}
	if !e.publishAll(outs) {
		for _, m := range took {
			_ = m.NakWithDelay(time.Second)
		}
		return
	}
	// acknowledged and confirmed one by one (a round holds a few): an
	// acknowledgement still in the client's buffer when the process dies
	// would distribute its pack again
	for _, m := range took {
		if err := m.DoubleAck(ctx); err != nil {
			e.log.Warn("asyncnats: ingest pack not acknowledged (it will be distributed again)", "err", err)
		}
	}
	seen := map[string]bool{}
	for _, o := range outs {
		if !seen[o.group] {
			seen[o.group] = true
			e.notifyReady(o.group)
		}
	}
}

// publishAll publishes every out (asynchronously, together), trying the
// failed ones again each second until all are acknowledged or the engine
// closes (false).
func (e *Engine) publishAll(outs []*out) bool {
	for {
		var wg sync.WaitGroup
		failed := false
		var mu sync.Mutex
		for _, o := range outs {
			if o.done {
				continue
			}
			msg := &nats.Msg{Subject: o.subj, Data: o.data, Header: nats.Header{}}
			msg.Header.Set(packHeader, packBinary)
			f, err := e.js.PublishMsgAsync(msg, jetstream.WithExpectStream(StreamName))
			if err != nil {
				mu.Lock()
				failed = true
				mu.Unlock()
				continue
			}
			wg.Go(func() {
				t := time.NewTimer(e.cfg.SubmitTimeout)
				defer t.Stop()
				select {
				case <-f.Ok():
					o.done = true
				case err := <-f.Err():
					mu.Lock()
					failed = true
					mu.Unlock()
					e.log.Warn("asyncnats: distribution publish failed; trying again", "subject", o.subj, "err", err)
				case <-t.C:
					mu.Lock()
					failed = true
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if !failed {
			return true
		}
		select {
		case <-e.stop:
			return false
		case <-time.After(time.Second):
		}
	}
}

// purgeKey is the status bucket's key of a purge mark: the last stream
// sequence that a purge of (group, tenant) covered (tenant "" = every
// tenant of the group).
func purgeKey(group, tenant string) string {
	tok := "all"
	if tenant != "" {
		tok = "t" + async.TenantToken(tenant)
	}
	return "purge." + group + "." + tok
}

// purgedAt returns the highest stream sequence a purge of group or of
// (group, tenant) covered, 0 when none; marks caches the answers of one
// round.
func (e *Engine) purgedAt(ctx context.Context, marks map[string]uint64, group, tenant string) uint64 {
	var hi uint64
	for _, k := range []string{purgeKey(group, ""), purgeKey(group, tenant)} {
		v, ok := marks[k]
		if !ok {
			v = 0
			if ent, err := e.kv.Get(ctx, k); err == nil {
				v, _ = strconv.ParseUint(string(ent.Value()), 10, 64)
			}
			marks[k] = v
		}
		hi = max(hi, v)
	}
	return hi
}

// markPurged records a purge of (group, tenant) up to the stream's last
// sequence: members of ingest packs up to it are not distributed and
// Lookup no longer finds them.
func (e *Engine) markPurged(ctx context.Context, group, tenant string, last uint64) error {
	_, err := e.kv.Put(ctx, purgeKey(group, tenant), []byte(strconv.FormatUint(last, 10)))
	return err
}

// Undistributed returns how many ingest packs wait for (or are in) their
// distribution: 0 once every acknowledged packed submission is in its
// tenant's queue. asyncbench reads it to show that distribution keeps up.
func (e *Engine) Undistributed(ctx context.Context) (uint64, error) {
	c, err := e.stream.Consumer(ctx, ingestConsumer)
	if err != nil {
		return 0, err
	}
	info, err := c.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.NumPending + uint64(info.NumAckPending), nil
}
