// Package asyncnats is async.Engine on NATS JetStream: an in-process
// nats-server (the default, its file store in the gateway's data dir) or an
// external cluster, one code path.
//
// Layout: stream VEER_ASYNC (file storage, limits retention of
// Config.Retention, duplicate window of Config.IdempotencyWindow) with a
// subject per tenant and group, veer.async.q.<hex tenant>.<group>; a
// durable pull consumer per (group, tenant), explicit acks with
// Config.AckWait, unlimited redeliveries; bucket VEER_ASYNC_STATUS (the
// status records); stream VEER_ASYNC_DEAD (dead letters). An invocation id
// is its stream sequence and a nonce; a keyed submission's message id is
// the hash of its tenant and its key, and its nonce is derived from both,
// so a duplicate's acknowledgement (which carries the original's sequence)
// rebuilds the original's id without a read.
//
// Packing (Config.Batch, on by default): the unkeyed submissions that
// arrive while a publish is in flight, of any tenants and groups, are
// published together as one message on veer.async.in (one synced write,
// one acknowledgement that answers each of them); their ids name that
// message. A distributor (in every engine, over one durable consumer)
// moves each round of such ingest packs to one pack per (tenant, group)
// subject (published together, each acknowledged) and acknowledges the ingest
// packs only after those writes: consumption stays per tenant in the
// store. A crash in between distributes a pack twice; a worker that finds
// its invocation running elsewhere waits for it, one that finds it
// finished skips it. A purge leaves a mark (the last sequence it covered)
// so that packed members up to it are neither distributed nor found. Retries
// are requeued on the tenant's "retry" subject under their own id;
// pauses live in bucket VEER_ASYNC_CONTROL (no TTL), watched by every
// engine.
//
// Contract: Enqueue returns once the server acknowledged the publish. The
// embedded server syncs every write before acknowledging (SyncAlways, the
// Go form of jetstream { sync_interval: always }). An external server's
// fsync policy cannot be read by a client: Open logs a warning naming what
// it must be set to (and that servers before 2.10 cannot be). The client
// keeps no reconnect buffer, so a publish while disconnected fails at once
// rather than landing after its submitter was told 503.
//
// Failure mode: an unreachable server makes every call return an error
// wrapping async.ErrUnavailable; the client reconnects on its own. A
// damaged store directory is recovered by nats-server with warnings in the
// log (what it cannot read is dropped: a stream whose metadata is corrupt
// is recreated empty); a directory it cannot use at all (a file, no
// permission) is an error of Open naming it.
package asyncnats
