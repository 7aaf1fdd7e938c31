package asyncnats

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/veerhq/veer/async"
	"github.com/veerhq/veer/obs"
)

// Names in JetStream.
const (
	StreamName  = "VEER_ASYNC"
	DeadStream  = "VEER_ASYNC_DEAD"
	StatusKV    = "VEER_ASYNC_STATUS"
	subjectBase = "veer.async.q."    // + tenant token + "." + group
	deadBase    = "veer.async.dead." // + group
	invHeader   = "Veer-Inv"
)

// Options are the run-time wiring of an Engine.
type Options struct {
	// Logger: default slog.Default().
	Logger *slog.Logger
	// Name of the NATS client connection; default "veer-async".
	Name string
	// DistributeEvery: the distributor's pause after a round that found
	// ingest packs (an idle one starts at once); default
	// DefaultDistributeEvery, negative none.
	DistributeEvery time.Duration
}

// DefaultDistributeEvery spaces the distributor's rounds under load: the
// ingest packs of 5 ms gather into one round, whose per-tenant packs are
// fewer synced writes beside the submissions' own. Measured with
// asyncbench (docs/async.md): 8 tenants 20 362/s, p99 17 ms against
// 14 598/s, p99 21 ms without the pause, in the same run; packed
// invocations become consumable a few ms later.
const DefaultDistributeEvery = 5 * time.Millisecond

// Engine is async.Engine on JetStream: one stream (VEER_ASYNC, a subject
// per tenant and group, file storage, the idempotency window as its
// duplicate window), a durable pull consumer per group, a key-value bucket
// of statuses and a dead-letter stream.
type Engine struct {
	cfg    async.Config
	log    *slog.Logger
	srv    *server.Server // nil when external
	nc     *nats.Conn
	js     jetstream.JetStream
	stream jetstream.Stream
	dead   jetstream.Stream
	kv     jetstream.KeyValue
	mu     sync.Mutex
	cons   map[string]jetstream.Consumer
	left   map[string][]async.Delivery // (group, tenant) -> members of a fetched pack not handed out yet

	bmu       sync.Mutex
	bq        subjQueue // packing: submissions waiting for the next ingest pack
	pmu       sync.Mutex
	packs     map[*packMsg]bool // delivered packs with unfinished members
	stop      chan struct{}
	wg        sync.WaitGroup
	rmu       sync.Mutex
	ready     func(group string)
	distEvery time.Duration
	kick      chan struct{} // an ingest pack was stored: distribute now

	ctl     jetstream.KeyValue // shared operator state (pauses)
	pauseMu sync.Mutex
	pauses  map[string]bool
}

var _ async.Engine = (*Engine)(nil)

// Open starts (embedded) or connects to (external) JetStream and creates
// or updates the streams, the bucket and the group consumers. The
// embedded server stores in cfg.Dir (required then). A corrupt or
// truncated store is recovered by nats-server with a warning in the log
// (what it cannot read is dropped); a store it cannot open at all is an
// error naming the directory.
func Open(cfg async.Config, opts Options) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := cfg.WithDefaults()
	e := &Engine{cfg: c, log: obs.LoggerOr(opts.Logger), cons: map[string]jetstream.Consumer{}, left: map[string][]async.Delivery{},
		packs: map[*packMsg]bool{}, stop: make(chan struct{}), pauses: map[string]bool{}, kick: make(chan struct{}, 1)}
	name := opts.Name
	if name == "" {
		name = "veer-async"
	}
	nopts := []nats.Option{nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond),
		nats.RetryOnFailedConnect(false),
		// no reconnect buffer: a publish while disconnected fails at once
		// instead of landing later, after its submitter got a 503
		nats.ReconnectBufSize(-1)}
	var err error
	if c.Engine == "embedded" {
		if e.srv, err = startEmbedded(c.Dir, e.log); err != nil {
			return nil, err
		}
		e.nc, err = nats.Connect("", append(nopts, nats.InProcessServer(e.srv))...)
	} else {
		e.nc, err = nats.Connect(strings.Join(c.URLs, ","), nopts...)
	}
	if err != nil {
		e.shutdown()
		return nil, fmt.Errorf("asyncnats: connect: %w: %w", async.ErrUnavailable, err)
	}
	if c.Engine == "external" {
		e.warnDurability()
	}
	if err := e.setup(); err != nil {
		e.shutdown()
		return nil, err
	}
	e.distEvery = cmp.Or(opts.DistributeEvery, DefaultDistributeEvery)
	dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.startDistributor(dctx); err != nil {
		e.shutdown()
		return nil, fmt.Errorf("asyncnats: ingest consumer: %w", err)
	}
	e.wg.Go(e.keepPacks)
	ready := make(chan struct{})
	e.wg.Go(func() { e.watchPauses(ready) })
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		e.log.Warn("asyncnats: the shared pauses were not read within 10s; they apply once read")
	}
	return e, nil
}

// warnDurability says what an external server must be set to: its fsync
// policy is not visible to a client, only its version.
func (e *Engine) warnDurability() {
	v := e.nc.ConnectedServerVersion()
	if !versionAtLeast(v, 2, 10) {
		e.log.Warn("asyncnats: the external NATS server predates sync_interval (2.10): its JetStream store fsyncs only every 2 minutes by default, so a 202 can be lost in a power failure; upgrade and set jetstream { sync_interval: always } (docs/async.md)", "version", v)
		return
	}
	e.log.Warn("asyncnats: an external NATS server's fsync policy cannot be read by a client: it must run with jetstream { sync_interval: always }, or acknowledged submissions can be lost in a power failure (docs/async.md)", "version", v)
}

func versionAtLeast(v string, major, minor int) bool {
	f := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(f) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(f[0])
	mi, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

func (e *Engine) setup() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js, err := jetstream.New(e.nc)
	if err != nil {
		return err
	}
	e.js = js
	e.stream, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: StreamName, Subjects: []string{subjectBase + ">", ingestSubject}, Storage: jetstream.FileStorage,
		Retention: jetstream.LimitsPolicy, MaxAge: e.cfg.Retention, Duplicates: e.cfg.IdempotencyWindow,
		Description: "veer async invocations",
	})
	if err != nil {
		return fmt.Errorf("asyncnats: stream %s: %w: %w", StreamName, async.ErrUnavailable, err)
	}
	e.dead, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: DeadStream, Subjects: []string{deadBase + ">"}, Storage: jetstream.FileStorage,
		Retention: jetstream.LimitsPolicy, MaxAge: e.cfg.Retention, Description: "veer async dead letters",
	})
	if err != nil {
		return fmt.Errorf("asyncnats: stream %s: %w: %w", DeadStream, async.ErrUnavailable, err)
	}
	e.kv, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: StatusKV, TTL: e.cfg.Retention,
		Storage: jetstream.FileStorage, Description: "veer async invocation status"})
	if err != nil {
		return fmt.Errorf("asyncnats: bucket %s: %w: %w", StatusKV, async.ErrUnavailable, err)
	}
	e.ctl, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: ControlKV,
		Storage: jetstream.FileStorage, Description: "veer async operator state (pauses)"})
	if err != nil {
		return fmt.Errorf("asyncnats: bucket %s: %w: %w", ControlKV, async.ErrUnavailable, err)
	}
	return nil
}

// Close drains the connection and stops an embedded server.
func (e *Engine) Close() error {
	select {
	case <-e.stop:
	default:
		close(e.stop)
	}
	e.wg.Wait()
	e.shutdown()
	return nil
}

func (e *Engine) shutdown() {
	if e.nc != nil {
		e.nc.Close()
	}
	if e.srv != nil {
		e.srv.Shutdown()
		e.srv.WaitForShutdown()
	}
}

// meta is the stored form of an invocation, minus its body (the message
// data) and id (its sequence and nonce).
type meta struct {
	async.Invocation
	Nonce string `json:"nonce"`
}

func subject(tenant, group string) string {
	return subjectBase + async.TenantToken(tenant) + "." + group
}

// Enqueue implements async.Engine: one publish, acknowledged by the server
// after the write is synced.
func (e *Engine) Enqueue(ctx context.Context, inv *async.Invocation) (string, bool, error) {
	id, dup, err := e.enqueue(ctx, inv, true)
	return id, dup, err
}

func (e *Engine) enqueue(ctx context.Context, inv *async.Invocation, dedup bool) (string, bool, error) {
	if e.cfg.Batched() && (inv.Key == "" || !dedup) {
		id, err := e.enqueuePacked(ctx, inv)
		return id, false, err
	}
	nonce := async.Nonce(inv.Tenant, "")
	if dedup {
		nonce = async.Nonce(inv.Tenant, inv.Key)
	}
	m := meta{Invocation: *inv, Nonce: nonce}
	m.Body, m.ID = nil, ""
	hdr, err := json.Marshal(m)
	if err != nil {
		return "", false, err
	}
	msg := &nats.Msg{Subject: subject(inv.Tenant, inv.Group), Data: inv.Body, Header: nats.Header{}}
	msg.Header.Set(invHeader, string(hdr))
	var popts []jetstream.PublishOpt
	if inv.Key != "" && dedup {
		popts = append(popts, jetstream.WithMsgID(async.DedupID(inv.Tenant, inv.Key)))
	}
	popts = append(popts, jetstream.WithExpectStream(StreamName))
	ack, err := e.js.PublishMsg(ctx, msg, popts...)
	if err != nil {
		return "", false, fmt.Errorf("asyncnats: publish: %w: %w", async.ErrUnavailable, err)
	}
	id := async.FormatID(ack.Sequence, nonce)
	inv.ID = id
	return id, ack.Duplicate, nil
}

// Requeue implements async.Engine: one message under inv's own id, on
// its group's subject, deduplicated by dedup.
func (e *Engine) Requeue(ctx context.Context, inv *async.Invocation, dedup string) error {
	m := meta{Invocation: *inv}
	m.Body = nil
	if _, nonce, err := async.ParseID(inv.ID); err == nil {
		m.Nonce = nonce
	}
	hdr, err := json.Marshal(m)
	if err != nil {
		return err
	}
	msg := &nats.Msg{Subject: subject(inv.Tenant, inv.Group), Data: inv.Body, Header: nats.Header{}}
	msg.Header.Set(invHeader, string(hdr))
	if _, err := e.js.PublishMsg(ctx, msg, jetstream.WithMsgID(dedup), jetstream.WithExpectStream(StreamName)); err != nil {
		return fmt.Errorf("asyncnats: requeue: %w: %w", async.ErrUnavailable, err)
	}
	return nil
}

// decode rebuilds an invocation from a stored message.
func decode(seq uint64, h nats.Header, data []byte) (*async.Invocation, error) {
	var m meta
	if err := json.Unmarshal([]byte(h.Get(invHeader)), &m); err != nil {
		return nil, fmt.Errorf("asyncnats: message %d: %w", seq, err)
	}
	inv := m.Invocation
	inv.ID = cmp.Or(inv.ID, async.FormatID(seq, m.Nonce)) // a requeued retry keeps its id
	inv.Body = data
	return &inv, nil
}

// Lookup implements async.Engine.
func (e *Engine) Lookup(ctx context.Context, id string) (*async.Invocation, error) {
	seq, nonce, err := async.ParseID(id)
	if err != nil {
		return nil, err
	}
	raw, err := e.stream.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, async.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("asyncnats: %w: %w", async.ErrUnavailable, err)
	}
	invs, err := decodeAll(seq, raw.Header, raw.Data)
	if err != nil {
		return nil, async.ErrNotFound
	}
	for _, inv := range invs {
		if strings.HasSuffix(inv.ID, "-"+nonce) {
			if raw.Subject == ingestSubject && e.purgedAt(ctx, map[string]uint64{}, inv.Group, inv.Tenant) >= seq {
				return nil, async.ErrNotFound // purged (distributed or not)
			}
			return inv, nil
		}
	}
	return nil, async.ErrNotFound
}

func statusKey(id string) string { return strings.ReplaceAll(id, "-", "_") }

// Status implements async.Engine.
func (e *Engine) Status(ctx context.Context, id string) (async.Status, bool, error) {
	ent, err := e.kv.Get(ctx, statusKey(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return async.Status{}, false, nil
	}
	if err != nil {
		return async.Status{}, false, fmt.Errorf("asyncnats: %w: %w", async.ErrUnavailable, err)
	}
	var st async.Status
	if err := json.Unmarshal(ent.Value(), &st); err != nil {
		e.log.Warn("asyncnats: unreadable status record ignored", "id", id, "err", err)
		return async.Status{}, false, nil
	}
	return st, true, nil
}

// SetStatus implements async.Engine.
func (e *Engine) SetStatus(ctx context.Context, st async.Status) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	if _, err := e.kv.Put(ctx, statusKey(st.ID), b); err != nil {
		return fmt.Errorf("asyncnats: %w: %w", async.ErrUnavailable, err)
	}
	return nil
}

// List implements async.Engine: the tenant's submissions in stream
// order, page by page: the messages on its subjects and the members of the
// ingest packs (packed submissions, listed as soon as they are
// acknowledged, before and after their distribution), each invocation
// once, by the message that gave it its id (a distributed pack's or a
// retry's copy is skipped). A pack is listed whole, so a page may exceed
// limit by its size; a page stops after maxListScan messages (fewer than
// limit, a next cursor) so that a tenant with few submissions among many
// packs of others is answered in bounded time.
func (e *Engine) List(ctx context.Context, tenant string, cursor uint64, limit int) ([]*async.Invocation, uint64, error) {
	own := subjectBase + async.TenantToken(tenant) + ".*"
	seq := max(cursor, 1)
	next := func(filter string, from uint64) (*jetstream.RawStreamMsg, error) {
		raw, err := e.stream.GetMsg(ctx, from, jetstream.WithGetMsgSubject(filter))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("asyncnats: %w: %w", async.ErrUnavailable, err)
		}
		return raw, nil
	}
	ta, err := next(own, seq)
	if err != nil {
		return nil, 0, err
	}
	ia, err := next(ingestSubject, seq)
	if err != nil {
		return nil, 0, err
	}
	marks := map[string]uint64{}
	var out []*async.Invocation
	for scanned := 0; len(out) < limit; scanned++ {
		if scanned == maxListScan {
			return out, seq, nil
		}
		raw, filter := ta, own
		if raw == nil || ia != nil && ia.Sequence < raw.Sequence {
			raw, filter = ia, ingestSubject
		}
		if raw == nil {
			return out, 0, nil
		}
		seq = raw.Sequence + 1
		invs, err := decodeAll(raw.Sequence, raw.Header, raw.Data)
		if err == nil {
			for _, inv := range invs {
				if s, _, _ := async.ParseID(inv.ID); inv.Tenant != tenant || s != raw.Sequence {
					continue // another tenant's, or a copy
				}
				if filter == ingestSubject && e.purgedAt(ctx, marks, inv.Group, tenant) >= raw.Sequence {
					continue
				}
				out = append(out, inv)
			}
		}
		if filter == own {
			ta, err = next(own, seq)
		} else {
			ia, err = next(ingestSubject, seq)
		}
		if err != nil {
			return nil, 0, err
		}
	}
	return out, seq, nil
}

const maxListScan = 1000

// DeadLetter implements async.Engine.
func (e *Engine) DeadLetter(ctx context.Context, inv *async.Invocation, st async.Status) error {
	b, _ := json.Marshal(struct {
		Invocation *async.Invocation `json:"invocation"`
		Status     async.Status      `json:"status"`
	}{inv, st})
	msg := &nats.Msg{Subject: deadBase + inv.Group, Data: b, Header: nats.Header{}}
	if _, err := e.js.PublishMsg(ctx, msg, jetstream.WithMsgID("dead:"+inv.ID), jetstream.WithExpectStream(DeadStream)); err != nil {
		return fmt.Errorf("asyncnats: dead letter: %w: %w", async.ErrUnavailable, err)
	}
	return nil
}

// Tenants implements async.Engine: the tenant tokens of the group's
// subjects in the stream.
func (e *Engine) Tenants(ctx context.Context, group string) ([]string, error) {
	info, err := e.stream.Info(ctx, jetstream.WithSubjectFilter(subjectBase+"*."+group))
	if err != nil {
		return nil, fmt.Errorf("asyncnats: %w: %w", async.ErrUnavailable, err)
	}
	out := make([]string, 0, len(info.State.Subjects))
	for subj := range info.State.Subjects {
		tok := strings.TrimSuffix(strings.TrimPrefix(subj, subjectBase), "."+group)
		if t, ok := async.ParseTenantToken(tok); ok {
			out = append(out, t)
		}
	}
	return out, nil
}

// consumer returns the durable pull consumer of (group, tenant), created
// the first time: one per tenant, so that a tenant's backlog never stands
// in front of another's (the scheduler takes turns over them).
func (e *Engine) consumer(ctx context.Context, group, tenant string) (jetstream.Consumer, error) {
	key := group + "\x00" + tenant
	e.mu.Lock()
	c := e.cons[key]
	e.mu.Unlock()
	if c != nil {
		return c, nil
	}
	h := sha256.Sum256([]byte(tenant))
	conc := async.DefaultConcurrency
	for _, g := range e.cfg.Groups {
		if g.Name == group {
			conc = g.Concurrency
		}
	}
	c, err := e.stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: "veer-" + group + "-" + hex.EncodeToString(h[:8]), FilterSubject: subject(tenant, group),
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: e.cfg.AckWait, MaxDeliver: -1,
		MaxAckPending: maxAckPending(group, conc), DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("asyncnats: consumer of group %s: %w: %w", group, async.ErrUnavailable, err)
	}
	e.mu.Lock()
	e.cons[key] = c
	e.mu.Unlock()
	return c, nil
}

// maxAckPending bounds a tenant consumer's delivered, unacknowledged
// messages. The retry and timer groups hold their waiting invocations as
// delivered messages (each fetched once and delivered again when due), so
// theirs is large: beyond it a tenant's later-stored invocations wait for
// its earlier ones to finish (late, never early).
func maxAckPending(group string, conc int) int {
	if group == async.RetryGroup || group == async.TimerGroup {
		return delayedAckPending
	}
	return max(4*conc, 64)
}

const delayedAckPending = 20000

// FetchTenant implements async.Engine.
func (e *Engine) FetchTenant(ctx context.Context, group, tenant string, n int) ([]async.Delivery, error) {
	key := group + "\x00" + tenant
	e.mu.Lock()
	if l := e.left[key]; len(l) > 0 {
		k := min(n, len(l))
		out := l[:k:k]
		e.left[key] = l[k:]
		e.mu.Unlock()
		return out, nil
	}
	e.mu.Unlock()
	cons, err := e.consumer(ctx, group, tenant)
	if err != nil {
		return nil, err
	}
	batch, err := cons.FetchNoWait(n)
	if err != nil {
		return nil, fmt.Errorf("asyncnats: fetch: %w: %w", async.ErrUnavailable, err)
	}
	var out []async.Delivery
	for msg := range batch.Messages() {
		md, err := msg.Metadata()
		if err != nil {
			_ = msg.Term()
			continue
		}
		invs, err := decodeAll(md.Sequence.Stream, msg.Headers(), msg.Data())
		if err != nil || len(invs) == 0 {
			e.log.Warn("asyncnats: undecodable message dropped", "seq", md.Sequence.Stream, "err", err)
			_ = msg.Term()
			continue
		}
		if msg.Headers().Get(packHeader) == "" {
			out = append(out, &delivery{msg: msg, inv: invs[0]})
			continue
		}
		p := &packMsg{e: e, msg: msg, open: len(invs)}
		e.pmu.Lock()
		e.packs[p] = true
		e.pmu.Unlock()
		for _, inv := range invs {
			out = append(out, &member{p: p, inv: inv})
		}
	}
	if len(out) > n {
		e.mu.Lock()
		e.left[key] = append(e.left[key], out[n:]...)
		e.mu.Unlock()
		out = out[:n]
	}
	if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, jetstream.ErrNoMessages) && len(out) == 0 {
		return nil, fmt.Errorf("asyncnats: fetch: %w: %w", async.ErrUnavailable, err)
	}
	return out, nil
}

type delivery struct {
	msg jetstream.Msg
	inv *async.Invocation
}

func (d *delivery) Invocation() *async.Invocation { return d.inv }
func (d *delivery) Ack() error                    { return d.msg.Ack() }
func (d *delivery) InProgress() error             { return d.msg.InProgress() }
func (d *delivery) Retry(delay time.Duration) error {
	if delay <= 0 {
		return d.msg.Nak()
	}
	return d.msg.NakWithDelay(delay)
}

// DataDir is the embedded store's directory under a gateway data dir.
func DataDir(gatewayDataDir string) string { return filepath.Join(gatewayDataDir, "async") }
