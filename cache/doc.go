// Package cache keeps dependency data (auth tokens, tenant config) close at
// hand and serves it while the dependency is down (FunctionGraph, seed 003:
// "auth tokens kept 24 h").
//
// A Cache[V] maps string keys to values produced by a Loader. A value is
// fresh for Config.TTL; after that the next Get reloads it. When the reload
// fails, Get serves the old value, marked stale, as long as it is younger
// than Config.MaxStale (default 24 h), and does not ask the failing
// dependency again for that key before Config.ErrorBackoff has passed.
// Concurrent Gets of one key share one load (single flight); a caller that
// gives up does not cancel the load for the others.
//
// The cache is bounded (Config.MaxEntries, least recently used evicted).
// Invalidate drops a key here and, through Options.Publish, tells the other
// instances; cache/cacheredis carries those messages over Redis pub/sub and
// calls InvalidateLocal on each receiver (and ExpireAll after it reconnects,
// since messages sent meanwhile are lost).
//
// Failure mode: with no value younger than MaxStale, the loader's error is
// returned. A value is never served past MaxStale.
package cache
