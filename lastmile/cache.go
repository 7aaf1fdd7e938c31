package lastmile

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/veerhq/veer/internal/atomicfile"
	"github.com/veerhq/veer/routing/schedule"
)

// cacheFileVersion is the version of the persisted cache file format
// written (2 adds the protocol memory); version 1 files are read too.
const cacheFileVersion = 2

// maxCacheFileSize bounds a cache file; a larger one is treated as corrupt.
const maxCacheFileSize = 4 << 20

// ErrCacheFile: the persisted cache file is corrupt or of an unknown version.
var ErrCacheFile = errors.New("lastmile: bad DNS cache file")

type cacheEntry struct {
	addrs   []netip.Addr
	expires time.Time // end of the TTL
	stored  time.Time
}

// dnsCache is the resolver's answer cache: fresh answers within their TTL,
// stale ones (RFC 8767) up to maxStale past it, persisted to a file after
// every change so that a cold start can serve stale answers.
type dnsCache struct {
	maxEntries int
	path       string
	log        *slog.Logger

	mu      sync.Mutex
	m       map[string]cacheEntry
	dirty   bool // a put since the last snapshot written
	writing bool // a writer goroutine runs
	kick    chan struct{}
	wg      sync.WaitGroup

	saveMu sync.Mutex // serialises file writes

	// loaded is what the file held besides DNS answers; extras, if set,
	// returns what to write instead (the Transport's live memory).
	loaded fileExtras
	extras func() fileExtras
}

// fileExtras is the protocol memory persisted beside the DNS answers.
type fileExtras struct {
	protocols []protoEntry
	altSvc    []altSvcEntry
}

func newDNSCache(path string, maxEntries int, now time.Time, log *slog.Logger) *dnsCache {
	c := &dnsCache{maxEntries: maxEntries, path: path, log: log, m: map[string]cacheEntry{}, kick: make(chan struct{}, 1)}
	if path == "" {
		return c
	}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return c
	case err != nil:
		log.Warn("lastmile: DNS cache file unreadable, starting empty", "path", path, "err", err)
		return c
	}
	f, err := parseCacheFile(data)
	if err != nil {
		log.Warn("lastmile: DNS cache file corrupt, ignored", "path", path, "err", err)
		return c
	}
	c.m, c.loaded = f.entries, f.extras
	c.evict(now)
	return c
}

// get returns the entry for name (canonical) and whether it is fresh.
func (c *dnsCache) get(name string, now time.Time) (cacheEntry, bool, bool) {
	c.mu.Lock()
	e, ok := c.m[name]
	c.mu.Unlock()
	return e, ok, ok && now.Before(e.expires)
}

func (c *dnsCache) put(name string, addrs []netip.Addr, ttl time.Duration, now time.Time) {
	c.mu.Lock()
	c.m[name] = cacheEntry{addrs: addrs, expires: now.Add(ttl), stored: now}
	c.evict(now)
	c.changedLocked()
}

// touch schedules a write of the file (the protocol memory changed).
func (c *dnsCache) touch() {
	c.mu.Lock()
	c.changedLocked()
}

// changedLocked marks the cache dirty and makes sure a writer runs; it
// unlocks mu.
func (c *dnsCache) changedLocked() {
	if c.path == "" {
		c.mu.Unlock()
		return
	}
	// Persist off the request path: one writer goroutine at a time, which
	// keeps writing while puts arrive (writes coalesce; the file always ends
	// with the latest state).
	c.dirty = true
	start := !c.writing
	c.writing = true
	c.mu.Unlock()
	if start {
		c.wg.Add(1)
		go c.writer()
	}
}

// persistDelay is how long the writer waits before writing the file, so
// that a cold start's first requests do not share the CPU and disk with the
// write (measured: +30% time to first byte on loopback without it), and so
// that the answers of one launch coalesce into one write. Flush skips it.
const persistDelay = 500 * time.Millisecond

func (c *dnsCache) writer() {
	defer c.wg.Done()
	t := time.NewTimer(persistDelay)
	select {
	case <-t.C:
	case <-c.kick:
		t.Stop()
	}
	for {
		c.mu.Lock()
		if !c.dirty {
			c.writing = false
			c.mu.Unlock()
			return
		}
		c.dirty = false
		snap := c.snapshotLocked()
		c.mu.Unlock()
		x := c.loaded
		if c.extras != nil {
			x = c.extras()
		}
		snap.Protocols, snap.AltSvc = x.protocols, x.altSvc
		if err := c.save(snap); err != nil {
			c.log.Warn("lastmile: DNS cache not persisted", "path", c.path, "err", err)
		}
	}
}

// flush waits until every put so far is on disk.
func (c *dnsCache) flush() {
	c.mu.Lock()
	writing := c.writing
	c.mu.Unlock()
	if writing {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
	c.wg.Wait()
	// A kick nobody took (the writer had passed its wait) must not
	// shorten the next writer's delay.
	select {
	case <-c.kick:
	default:
	}
}

// evict drops the entries that expired first until the cache fits. Called
// with mu held (or before the cache is shared).
func (c *dnsCache) evict(time.Time) {
	for len(c.m) > c.maxEntries {
		var oldest string
		var t time.Time
		for k, e := range c.m {
			if oldest == "" || e.expires.Before(t) {
				oldest, t = k, e.expires
			}
		}
		delete(c.m, oldest)
	}
}

type cacheFile struct {
	Version   int              `json:"version"`
	Entries   []cacheFileEntry `json:"entries"`
	Protocols []protoEntry     `json:"protocols,omitempty"`
	AltSvc    []altSvcEntry    `json:"alt_svc,omitempty"`
}

// parsedCache is a decoded cache file.
type parsedCache struct {
	entries map[string]cacheEntry
	extras  fileExtras
}

type cacheFileEntry struct {
	Name    string       `json:"name"`
	Addrs   []netip.Addr `json:"addrs"`
	Expires time.Time    `json:"expires"`
	Stored  time.Time    `json:"stored"`
}

func (c *dnsCache) snapshotLocked() cacheFile {
	f := cacheFile{Version: cacheFileVersion, Entries: make([]cacheFileEntry, 0, len(c.m))}
	for k, e := range c.m {
		f.Entries = append(f.Entries, cacheFileEntry{Name: k, Addrs: e.addrs, Expires: e.expires, Stored: e.stored})
	}
	return f
}

// save writes the snapshot atomically and durably (internal/atomicfile).
func (c *dnsCache) save(f cacheFile) error {
	data, err := jsonMarshal(f)
	if err != nil {
		return err
	}
	c.saveMu.Lock()
	defer c.saveMu.Unlock()
	return atomicfile.Write(c.path, data)
}

// parseCacheFile decodes a persisted cache. Entries with a bad name or no
// valid address make the whole file corrupt: a file that was not written by
// save is not trusted in part.
func parseCacheFile(data []byte) (parsedCache, error) {
	var out parsedCache
	if len(data) > maxCacheFileSize {
		return out, fmt.Errorf("%w: %d bytes", ErrCacheFile, len(data))
	}
	var f cacheFile
	if err := json.Unmarshal(data, &f); err != nil {
		return out, fmt.Errorf("%w: %v", ErrCacheFile, err)
	}
	if f.Version != 1 && f.Version != cacheFileVersion {
		return out, fmt.Errorf("%w: version %d, want %d", ErrCacheFile, f.Version, cacheFileVersion)
	}
	m := make(map[string]cacheEntry, len(f.Entries))
	for i, e := range f.Entries {
		if _, ok := dns.IsDomainName(e.Name); !ok || e.Name != dns.CanonicalName(e.Name) {
			return out, fmt.Errorf("%w: entries[%d]: bad name %q", ErrCacheFile, i, e.Name)
		}
		if len(e.Addrs) == 0 {
			return out, fmt.Errorf("%w: entries[%d]: no address", ErrCacheFile, i)
		}
		for _, a := range e.Addrs {
			if !schedule.UsableAddr(a) {
				return out, fmt.Errorf("%w: entries[%d]: bad address %v", ErrCacheFile, i, a)
			}
		}
		if e.Expires.Before(e.Stored) {
			return out, fmt.Errorf("%w: entries[%d]: expires before stored", ErrCacheFile, i)
		}
		m[e.Name] = cacheEntry{addrs: e.Addrs, expires: e.Expires, stored: e.Stored}
	}
	if err := validExtras(f.Protocols, f.AltSvc); err != nil {
		return out, err
	}
	return parsedCache{m, fileExtras{f.Protocols, f.AltSvc}}, nil
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }
