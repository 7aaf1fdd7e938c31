package limitredis

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Batching: decisions (and lease releases) that arrive while earlier ones
// are on the wire are queued and sent together, as one pipeline of script
// calls in one round trip, by a few flusher goroutines. A lone decision
// goes out at once; under load each round trip carries every decision that
// arrived meanwhile, so Redis and the client make one read and one write
// per batch instead of per decision.
const (
	// flushers is the number of batches in flight at once. Two keep
	// Redis busy while the client reads one reply and writes the next
	// batch; more make smaller batches, which cost more CPU per decision
	// on both sides (BenchmarkAdmitParallel: 1, 2 and 4 flushers gave
	// 8.4, 9.6-10.0 and 14-15 µs of client CPU and 8.4, 8.2-8.4 and
	// 10.3-11.3 µs of Redis CPU per decision; 2 had the best ns/op).
	flushers = 2
	// maxBatch bounds the calls of one pipeline.
	maxBatch = 256
)

// call states.
const (
	waiting int32 = iota
	delivered
	abandoned
)

// call is one decision or release in a batch.
type call struct {
	req     request
	release bool // ZREM req.ckeys' lease instead of deciding
	enq     time.Time
	reply   [3]int64
	err     error
	state   atomic.Int32
	noWait  bool // nobody waits: the flusher recycles it
	done    chan struct{}
	cmd     redis.Cmder // a release's ZREM
}

var callPool = sync.Pool{New: func() any { return &call{done: make(chan struct{}, 1)} }}

func getCall() *call {
	c := callPool.Get().(*call)
	c.state.Store(waiting)
	c.err, c.release, c.noWait, c.cmd = nil, false, false, nil
	return c
}

func putCall(c *call) {
	c.cmd = nil
	callPool.Put(c)
}

type batcher struct {
	mu     sync.Mutex
	cond   sync.Cond
	queue  []*call
	closed bool
	wg     sync.WaitGroup
}

func (l *Limiter) startFlushers() {
	b := &l.batch
	b.cond.L = &b.mu
	for range flushers {
		b.wg.Go(l.flusher)
	}
}

// stopFlushers lets the flushers send what is queued, then stops them;
// calls made afterwards are sent by their caller, one by one.
func (l *Limiter) stopFlushers() {
	b := &l.batch
	b.mu.Lock()
	b.closed = true
	b.cond.Broadcast()
	b.mu.Unlock()
	b.wg.Wait()
}

// submit queues c for the flushers and waits for its reply or for ctx.
// It reports false when ctx ended first: c is abandoned, and the flusher
// undoes its effect (a lease) and recycles it.
func (l *Limiter) submit(ctx context.Context, c *call) bool {
	b := &l.batch
	noWait := c.noWait
	c.enq = time.Now()
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		l.exec([]*call{c}, &scratch{})
		l.deliver(c)
	} else {
		b.queue = append(b.queue, c)
		b.cond.Signal()
		b.mu.Unlock()
	}
	if noWait {
		return true
	}
	select {
	case <-c.done:
		return true
	case <-ctx.Done():
		if c.state.CompareAndSwap(waiting, abandoned) {
			return false
		}
		<-c.done
		return true
	}
}

// scratch is a flusher's reusable buffers.
type scratch struct {
	pipe redis.Pipeliner // reusable: Exec empties it
	reqs []*request
	decs []*call
	cmds []*redis.Cmd
	keys []string
	args []any
}

func (l *Limiter) flusher() {
	b := &l.batch
	batch := make([]*call, 0, maxBatch)
	var sc scratch
	for {
		b.mu.Lock()
		for len(b.queue) == 0 && !b.closed {
			b.cond.Wait()
		}
		if len(b.queue) == 0 {
			b.mu.Unlock()
			return
		}
		n := min(len(b.queue), maxBatch)
		batch = append(batch[:0], b.queue[:n]...)
		rest := copy(b.queue, b.queue[n:])
		clear(b.queue[rest:])
		b.queue = b.queue[:rest]
		if rest > 0 {
			b.cond.Signal()
		}
		b.mu.Unlock()
		l.m.batch.Observe(float64(len(batch)))
		l.exec(batch, &sc)
		for i, c := range batch {
			l.deliver(c)
			batch[i] = nil
		}
	}
}

var errStale = errors.New("limitredis: no answer within the decision timeout")

// exec sends the calls in one round trip: the releases (ZREMs) first, so
// that the slots they free serve the decisions, then every decision in
// one script call (with Redis Cluster, whose script calls must stay in one
// hash slot, one script call per decision, pipelined). Its deadline is the
// oldest call's arrival plus Config.Timeout, so that time spent queued
// counts; calls already past it, or queued while in fallback, fail without
// a round trip.
func (l *Limiter) exec(calls []*call, sc *scratch) {
	deadline := calls[0].enq.Add(l.cfg.Timeout)
	if l.fallback.Load() || !time.Now().Before(deadline) {
		for _, c := range calls {
			c.err = errStale
		}
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	_, cluster := l.rdb.(*redis.ClusterClient)
	reqs, decs := sc.reqs[:0], sc.decs[:0]
	defer func() {
		clear(reqs)
		clear(decs)
		sc.reqs, sc.decs = reqs, decs
	}()
	if sc.pipe == nil {
		sc.pipe = l.rdb.Pipeline()
	}
	pipe := sc.pipe
	for _, c := range calls {
		if c.release {
			for _, k := range c.req.ckeys {
				c.cmd = pipe.ZRem(ctx, k, c.req.lease)
			}
			continue
		}
		decs = append(decs, c)
		reqs = append(reqs, &c.req)
	}
	cmds, keys, args := sc.cmds[:0], sc.keys[:0], sc.args[:0]
	defer func() {
		clear(cmds)
		clear(keys)
		clear(args)
		sc.cmds, sc.keys, sc.args = cmds, keys, args
	}()
	script := func(p redis.Pipeliner, eval bool) {
		cmds = cmds[:0]
		for i := 0; i < len(reqs); {
			n := len(reqs) - i
			if cluster {
				n = 1
			}
			keys, args = l.scriptCall(keys[:0], args[:0], reqs[i:i+n], "")
			if eval {
				cmds = append(cmds, admitScript.Eval(ctx, p, keys, args...))
			} else {
				cmds = append(cmds, admitScript.EvalSha(ctx, p, keys, args...))
			}
			i += n
		}
	}
	script(pipe, false)
	if h := testHookSending; h != nil {
		h(len(calls))
	}
	_, _ = pipe.Exec(ctx)
	if len(cmds) > 0 && redis.HasErrorPrefix(cmds[0].Err(), "NOSCRIPT") {
		// Redis lost its script cache (a restart, SCRIPT FLUSH): EVAL
		// loads it again.
		script(pipe, true)
		_, _ = pipe.Exec(ctx)
	}
	for _, c := range calls {
		if c.release {
			c.err = c.cmd.Err()
		}
	}
	i := 0
	for _, cmd := range cmds {
		n := len(decs) - i
		if cluster {
			n = 1
		}
		err := cmd.Err()
		if err == nil {
			err = parseReply(cmd.Val(), decs[i:i+n])
		}
		for _, c := range decs[i : i+n] {
			c.err = err
		}
		i += n
	}
}

// testHookSending, when set by a test, is called with the number of calls
// of each batch just before it is sent.
var testHookSending func(calls int)

var errReply = errors.New("limitredis: unexpected script reply")

// parseReply fills the replies of decs from the script's reply.
func parseReply(v any, decs []*call) error {
	vs, ok := v.([]any)
	if !ok || len(vs) != 1+3*len(decs) {
		return errReply
	}
	for i, c := range decs {
		for j := range 3 {
			n, ok := vs[1+3*i+j].(int64)
			if !ok {
				return errReply
			}
			c.reply[j] = n
		}
		if c.reply[0] == 1 {
			c.reply[2], _ = vs[0].(int64) // the admission's Redis time, µs
		}
	}
	return nil
}

// deliver hands c's reply to its waiter, or cleans up after a waiter that
// gave up: an admission it will never release has its lease released.
func (l *Limiter) deliver(c *call) {
	if c.noWait {
		putCall(c)
		return
	}
	if c.state.CompareAndSwap(waiting, delivered) {
		c.done <- struct{}{}
		return
	}
	if c.err == nil && !c.release && c.reply[0] == 1 && c.req.lease != "" {
		l.releaseLease(c.req.lease, c.req.ckeys)
	}
	putCall(c)
}

// releaseLease queues the removal of a lease from its sets, without
// waiting (a lease that is not removed expires by its TTL).
func (l *Limiter) releaseLease(lease string, ckeys []string) {
	r := getCall()
	r.release, r.noWait = true, true
	r.req.lease = lease
	r.req.ckeys = append(r.req.ckeys[:0], ckeys...)
	l.submit(context.Background(), r)
}
