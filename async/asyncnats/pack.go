package asyncnats

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/veerhq/veer/async"
)

// Packing (Config.Batch): the unkeyed submissions of any tenants and
// groups that arrive while a publish is in flight are published together
// as one message to the ingest subject when it returns: one synced write,
// one acknowledgement, after which each of them is answered (202). Their
// ids name that message's sequence, so Lookup finds them there.
//
// The distributor (distribute.go) then moves each ingest pack's members to
// their own (tenant, group) subjects, one pack per subject per round, and
// acknowledges the ingest packs only after those writes: consumption stays
// per tenant in the store (one tenant's backlog never stands in front of
// another's), as without packing. A per-tenant pack is delivered as one
// message and split into a delivery per invocation; the message is
// acknowledged when every member is, and delivered again (after the
// shortest wait asked) when a member asked for a retry: the members that
// finished are then skipped by their final status.
const (
	packHeader    = "Veer-Pack"
	maxPackItems  = 256
	maxPackBytes  = 4 << 20
	ingestSubject = "veer.async.in"
)

type packItem struct {
	Meta meta   `json:"m"`
	Body []byte `json:"b,omitempty"`
	// ID is set in a distributed pack: the id the member was given when
	// its ingest pack was stored (a distributed pack's own sequence is
	// not part of it).
	ID string `json:"i,omitempty"`
}

type pending struct {
	inv   *async.Invocation
	nonce string
	seq   uint64
	err   error
	done  chan struct{}
}

type subjQueue struct {
	items    []*pending
	flushing bool
}

// enqueuePacked adds inv to the next ingest pack and waits for that
// pack's acknowledgement.
func (e *Engine) enqueuePacked(ctx context.Context, inv *async.Invocation) (string, error) {
	p := &pending{inv: inv, nonce: async.Nonce(inv.Tenant, ""), done: make(chan struct{})}
	subj := ingestSubject
	e.bmu.Lock()
	q := &e.bq
	q.items = append(q.items, p)
	lead := !q.flushing
	q.flushing = true
	e.bmu.Unlock()
	if lead {
		go e.flush(subj, q)
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		return "", fmt.Errorf("asyncnats: publish: %w: %w", async.ErrUnavailable, ctx.Err())
	}
	if p.err != nil {
		return "", p.err
	}
	id := async.FormatID(p.seq, p.nonce)
	inv.ID = id
	return id, nil
}

// flush publishes the subject's waiting submissions, pack after pack,
// until none wait.
func (e *Engine) flush(subj string, q *subjQueue) {
	for {
		e.bmu.Lock()
		items := q.items
		if len(items) == 0 {
			q.flushing = false
			e.bmu.Unlock()
			return
		}
		n, size := 0, 0
		for n < len(items) && n < maxPackItems && (n == 0 || size+len(items[n].inv.Body) < maxPackBytes) {
			size += len(items[n].inv.Body) + 512
			n++
		}
		q.items = items[n:]
		e.bmu.Unlock()
		e.publishPack(subj, items[:n])
	}
}

func (e *Engine) publishPack(subj string, items []*pending) {
	pack := make([]packItem, len(items))
	for i, p := range items {
		m := meta{Invocation: *p.inv, Nonce: p.nonce}
		m.Body, m.ID = nil, ""
		pack[i] = packItem{Meta: m, Body: p.inv.Body}
	}
	data, err := encodePack(pack)
	var ack *jetstream.PubAck
	if err == nil {
		msg := &nats.Msg{Subject: subj, Data: data, Header: nats.Header{}}
		msg.Header.Set(packHeader, packBinary)
		ctx, cancel := context.WithTimeout(context.Background(), e.cfg.SubmitTimeout)
		ack, err = e.js.PublishMsg(ctx, msg, jetstream.WithExpectStream(StreamName))
		cancel()
		if err != nil {
			err = fmt.Errorf("asyncnats: publish: %w: %w", async.ErrUnavailable, err)
		}
	}
	for _, p := range items {
		if err != nil {
			p.err = err
		} else {
			p.seq = ack.Sequence
		}
		close(p.done)
	}
	if err == nil {
		e.kickDistributor()
	}
}

// decodeAll returns the invocations of a stored message: one, or a pack's.
func decodeAll(seq uint64, h nats.Header, data []byte) ([]*async.Invocation, error) {
	if h.Get(packHeader) == "" {
		inv, err := decode(seq, h, data)
		if err != nil {
			return nil, err
		}
		return []*async.Invocation{inv}, nil
	}
	pack, err := decodePack(h, data)
	if err != nil {
		return nil, fmt.Errorf("asyncnats: pack %d: %w", seq, err)
	}
	out := make([]*async.Invocation, len(pack))
	for i, it := range pack {
		inv := it.Meta.Invocation
		inv.ID = cmp.Or(it.ID, async.FormatID(seq, it.Meta.Nonce))
		inv.Body = it.Body
		out[i] = &inv
	}
	return out, nil
}

// packMsg is one delivered message shared by its members' deliveries.
type packMsg struct {
	e        *Engine
	msg      jetstream.Msg
	mu       sync.Mutex
	open     int
	released bool
	minDelay time.Duration
}

// finish records one member done (ack) or to be delivered again after
// delay; the last one acknowledges the message or delivers it again.
func (p *packMsg) finish(ack bool, delay time.Duration) error {
	p.mu.Lock()
	if !ack {
		if !p.released || delay < p.minDelay {
			p.minDelay = delay
		}
		p.released = true
	}
	p.open--
	last, released, d := p.open == 0, p.released, p.minDelay
	p.mu.Unlock()
	if !last {
		return nil
	}
	p.e.pmu.Lock()
	delete(p.e.packs, p)
	p.e.pmu.Unlock()
	if !released {
		return p.msg.Ack()
	}
	if d <= 0 {
		return p.msg.Nak()
	}
	return p.msg.NakWithDelay(d)
}

type member struct {
	p   *packMsg
	inv *async.Invocation
}

func (m *member) Invocation() *async.Invocation   { return m.inv }
func (m *member) Ack() error                      { return m.p.finish(true, 0) }
func (m *member) Retry(delay time.Duration) error { return m.p.finish(false, delay) }
func (m *member) InProgress() error               { return m.p.msg.InProgress() }

// keepPacks extends the ack deadline of every pack with unfinished
// members (some may wait in the leftover queue for their tenant's turn)
// until Close.
func (e *Engine) keepPacks() {
	t := time.NewTicker(e.cfg.AckWait / 3)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			e.pmu.Lock()
			for p := range e.packs {
				_ = p.msg.InProgress()
			}
			e.pmu.Unlock()
		case <-e.stop:
			return
		}
	}
}
