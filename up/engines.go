package up

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/control"
	"github.com/veerhq/veer/store"
	"github.com/veerhq/veer/store/storeetcd"
)

// External engines (issue 28, "beyond one machine"): the control plane's
// store in etcd and the gateways' limits shared through Redis. Each is
// either an external server (a URL: veer up only connects) or "local":
// Debian's etcd or redis-server run by veer up as a supervised child
// process in the data directory, on free loopback ports, like the gateways
// (own process group, Pdeathsig, restarted after restart_after), so that
// `veer chaos` can SIGKILL it.
//
// Without --redis each gateway limits /api/search locally to its share of
// the limit (limit ÷ 2); with it both share one counter in Redis, and when
// Redis fails each falls back to limit ÷ 2 (limitredis). The gateways and
// the private DNS read their files as before whichever store control uses:
// only the control plane talks to the store.

// Defaults of SearchConfig.
const (
	// DefaultSearchLimit is /api/search's rate limit over the whole system
	// (both gateways), requests/s: small enough that twice it fits one
	// core beside the population.
	DefaultSearchLimit = 100.0
	// DefaultSearchBurst is the limit's bucket size over the whole system:
	// small, so that a window of a few seconds measures the rate, not the
	// burst.
	DefaultSearchBurst = 10
	// PathSearch is the limited demo route.
	PathSearch = "/api/search"
	// StoreLocal and RedisLocal ask veer up to run the engine itself.
	StoreLocal = "etcd://local"
	RedisLocal = "local"
	// engineInstances is how many gateways share the limit.
	engineInstances = 2
	// etcdPrefix namespaces veer up's keys in a shared etcd.
	etcdPrefix = "/veer-up/"
)

// SearchConfig is the limited demo route /api/search (the same backend
// cost as /api/trips), limited per route over both gateways.
type SearchConfig struct {
	// Limit in requests/s over the whole system; default
	// DefaultSearchLimit.
	Limit float64 `yaml:"limit" json:"limit"`
	// Burst over the whole system; default DefaultSearchBurst.
	Burst int `yaml:"burst" json:"burst"`
}

// Engines is the state file's record of the external engines.
type Engines struct {
	// Store: "" (embedded), the etcd endpoints (comma-separated URLs).
	Store string `json:"store,omitempty"`
	// StoreLocal: veer up runs that etcd (EtcdPid).
	StoreLocal bool `json:"store_local,omitempty"`
	EtcdPid    int  `json:"etcd_pid,omitempty"`
	// Redis: "" (local limits), host:port of the shared limits' Redis.
	Redis      string `json:"redis,omitempty"`
	RedisLocal bool   `json:"redis_local,omitempty"`
	RedisPid   int    `json:"redis_pid,omitempty"`
	// SearchLimit and SearchBurst are /api/search's limit over the system.
	SearchLimit float64 `json:"search_limit"`
	SearchBurst int     `json:"search_burst"`
}

// ParseStore reads a --store value: "" (embedded), StoreLocal, or
// "etcd://HOST:PORT[,HOST:PORT...]", returned as client URLs.
func ParseStore(v string) (local bool, endpoints []string, err error) {
	if v == "" {
		return false, nil, nil
	}
	rest, ok := strings.CutPrefix(v, "etcd://")
	if !ok {
		return false, nil, fmt.Errorf("%q: want etcd://local or etcd://HOST:PORT[,HOST:PORT]", v)
	}
	if rest == "local" {
		return true, nil, nil
	}
	for _, hp := range strings.Split(rest, ",") {
		if err := checkHostPort(hp); err != nil {
			return false, nil, fmt.Errorf("%q: %w", v, err)
		}
		endpoints = append(endpoints, "http://"+hp)
	}
	return false, endpoints, nil
}

// ParseRedis reads a --redis value: "" (none), RedisLocal, or
// "redis://HOST:PORT", returned as host:port.
func ParseRedis(v string) (local bool, addr string, err error) {
	switch v {
	case "":
		return false, "", nil
	case RedisLocal:
		return true, "", nil
	}
	hp, ok := strings.CutPrefix(v, "redis://")
	if !ok {
		return false, "", fmt.Errorf("%q: want local or redis://HOST:PORT", v)
	}
	if err := checkHostPort(hp); err != nil {
		return false, "", fmt.Errorf("%q: %w", v, err)
	}
	return false, hp, nil
}

func checkHostPort(hp string) error {
	h, p, err := net.SplitHostPort(hp)
	if err != nil {
		return err
	}
	if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 || h == "" {
		return fmt.Errorf("%q: want HOST:PORT with a port 1..65535", hp)
	}
	return nil
}

func (c *Config) validateEngines() []error {
	var errs []error
	if _, _, err := ParseStore(c.Store); err != nil {
		errs = append(errs, config.Field("store", "%v", err))
	}
	if _, _, err := ParseRedis(c.Redis); err != nil {
		errs = append(errs, config.Field("redis", "%v", err))
	}
	if !(c.Search.Limit >= 0 && c.Search.Limit <= 100000) || math.IsNaN(c.Search.Limit) {
		errs = append(errs, config.Field("search.limit", "must be 0..100000 requests/s"))
	}
	if c.Search.Burst < 0 || c.Search.Burst > 100000 {
		errs = append(errs, config.Field("search.burst", "must be 0..100000"))
	}
	return errs
}

// startEngines starts the local engines (etcd, redis-server) the config
// asks for and waits until they accept connections; s.engines records
// them. Called first in Start: the gateways' configs name Redis and the
// control plane opens the store.
func (s *System) startEngines(ctx context.Context) error {
	storeLocal, endpoints, _ := ParseStore(s.cfg.Store)
	redisLocal, redisAddr, _ := ParseRedis(s.cfg.Redis)
	s.engines = Engines{StoreLocal: storeLocal, RedisLocal: redisLocal, SearchLimit: s.cfg.Search.Limit, SearchBurst: s.cfg.Search.Burst}
	if storeLocal {
		bin, err := exec.LookPath("etcd")
		if err != nil {
			return fmt.Errorf("--store %s: etcd not found (Debian package etcd-server; scripts/test-deps.sh installs it): %w", StoreLocal, err)
		}
		client, err := s.freeAddr()
		if err != nil {
			return err
		}
		peer, err := s.freeAddr()
		if err != nil {
			return err
		}
		dir := filepath.Join(s.dir, "etcd")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		curl, purl := "http://"+client, "http://"+peer
		s.etcdChild = s.newExeChild("etcd", bin, "--name", "veer-up", "--data-dir", dir,
			"--listen-client-urls", curl, "--advertise-client-urls", curl,
			"--listen-peer-urls", purl, "--initial-advertise-peer-urls", purl,
			"--initial-cluster", "veer-up="+purl, "--log-level", "error")
		if err := s.etcdChild.start(); err != nil {
			return err
		}
		endpoints = []string{curl}
		if err := waitTCP(ctx, client); err != nil {
			return fmt.Errorf("etcd: %w (log %s)", err, s.logPath("etcd"))
		}
	}
	s.engines.Store = strings.Join(endpoints, ",")
	if redisLocal {
		bin, err := exec.LookPath("redis-server")
		if err != nil {
			return fmt.Errorf("--redis %s: redis-server not found (Debian package redis-server; scripts/test-deps.sh installs it): %w", RedisLocal, err)
		}
		addr, err := s.freeAddr()
		if err != nil {
			return err
		}
		_, port, _ := net.SplitHostPort(addr)
		dir := filepath.Join(s.dir, "redis")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		// no persistence: a killed Redis comes back empty, as a cache
		// node does; the limits' counters start again
		s.redisChild = s.newExeChild("redis", bin, "--bind", "127.0.0.1", "--port", port, "--dir", dir,
			"--save", "", "--appendonly", "no")
		if err := s.redisChild.start(); err != nil {
			return err
		}
		redisAddr = addr
		if err := waitTCP(ctx, addr); err != nil {
			return fmt.Errorf("redis-server: %w (log %s)", err, s.logPath("redis"))
		}
	}
	s.engines.Redis = redisAddr
	return nil
}

// newExeChild is a supervised child running bin (not veer).
func (s *System) newExeChild(name, bin string, args ...string) *child {
	c := s.newChild(name, args...)
	c.exe = bin
	return c
}

// controlStore is the control plane's store config: etcd when --store
// names it, else the embedded one (zero value).
func (s *System) controlStore() storeetcd.Config {
	if s.engines.Store == "" {
		return storeetcd.Config{}
	}
	return storeetcd.Config{Endpoints: strings.Split(s.engines.Store, ","), Prefix: etcdPrefix,
		DialTimeout: time.Second, RequestTimeout: time.Second}
}

// putTable writes the routing table; a just-started etcd may refuse for a
// moment (no leader yet), so ErrUnavailable is retried until ctx ends.
func (s *System) putTable(ctx context.Context) error {
	for {
		_, err := s.ctrl.Store().Put(ctx, control.KeyTable, []byte(s.routingTable()), store.Write{Author: "veer up", Reason: "veer up's demo table"})
		if err == nil || !errors.Is(err, store.ErrUnavailable) {
			return err
		}
		if cerr := sleepCtx(ctx, 200*time.Millisecond); cerr != nil {
			return fmt.Errorf("%w (last: %v)", cerr, err)
		}
	}
}

// limitsYAML is a gateway's limits section: /api/search's route limited to
// the system's limit, shared through Redis (instances 2: the fallback is
// limit ÷ 2) or, without Redis, this gateway's share of it.
func (s *System) limitsYAML() string {
	rate, burst, instances := s.cfg.Search.Limit, s.cfg.Search.Burst, engineInstances
	redis := ""
	if s.engines.Redis != "" {
		redis = fmt.Sprintf(", redis: %q", s.engines.Redis)
		if s.cfg.Gateway.LimitUndivided {
			instances = 1
		}
	} else {
		rate, burst = rate/engineInstances, max(1, burst/engineInstances)
	}
	return fmt.Sprintf("limits: {dimensions: [{name: route, overrides: {search: {rate: %g, burst: %d}}}], keys: [route], instances: %d%s}\n",
		rate, burst, instances, redis)
}

// enginesState is the Engines record with the current pids.
func (s *System) enginesState() Engines {
	e := s.engines
	if s.etcdChild != nil {
		e.EtcdPid = s.etcdChild.Pid()
	}
	if s.redisChild != nil {
		e.RedisPid = s.redisChild.Pid()
	}
	return e
}
