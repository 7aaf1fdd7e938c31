package limitredis

import "github.com/redis/go-redis/v9"

// admitScript checks and commits every dimension of one request at once,
// with the server's clock.
//
// Time is kept in nanoseconds as two numbers, whole seconds and the
// nanoseconds within the second (with a fraction): a Lua number is a double,
// which holds nanoseconds since 1970 only to 256 ns, but holds each part
// exactly. A GCRA key's value is its theoretical arrival time (TAT) as
// "<seconds> <nanoseconds>"; the arithmetic is done on TAT − now, which
// stays below the tolerance and so keeps double precision (relative error
// about 1e-16). The emission interval T = 1e9/rate ns is given with its
// fraction, so no rate is rounded: the limit is exact to about 1e-7 ns per
// admission at any rate Config accepts (up to 1e9/s).
//
// KEYS: nr GCRA keys, then nc lease sets.
// ARGV: nr, nc, lease id, lease TTL (µs), now ("" for Redis TIME, or ns
// since the epoch in decimal: tests feed request times, and keys then
// expire after 60 s of Redis time instead of when the bucket is full
// again, which only Redis's own clock can tell), then per GCRA
// key: emission interval T (ns), tolerance tau = T·burst (ns), dimension
// index; then per lease set: max in flight, dimension index.
// Reply: {1, 0, now_µs} admitted; {0, dim, retry_after_ns} rate-limited;
// {0, dim, -1} concurrency-limited.
var admitScript = redis.NewScript(`
local now_s, now_ns
local fed = ARGV[5] ~= ''
if fed then
  now_s = tonumber(string.sub(ARGV[5], 1, -10))
  now_ns = tonumber(string.sub(ARGV[5], -9))
else
  local t = redis.call('TIME')
  now_s = tonumber(t[1])
  now_ns = tonumber(t[2]) * 1000
end
local now_us = now_s * 1000000 + math.floor(now_ns / 1000)
local nr = tonumber(ARGV[1])
local nc = tonumber(ARGV[2])
local lease = ARGV[3]
local ttl = tonumber(ARGV[4])
local a = 6
local ahead = {}
for i = 1, nr do
  local T = tonumber(ARGV[a])
  local tau = tonumber(ARGV[a + 1])
  local dim = tonumber(ARGV[a + 2])
  a = a + 3
  local d = 0
  local v = redis.call('GET', KEYS[i])
  if v then
    local sp = string.find(v, ' ', 1, true)
    if sp then
      d = (tonumber(string.sub(v, 1, sp - 1)) - now_s) * 1e9 + (tonumber(string.sub(v, sp + 1)) - now_ns)
    end
    if not (d > 0) then d = 0 end
  end
  d = d + T
  if d > tau then
    return {0, dim, math.min(math.ceil(d - tau), 9e18)}
  end
  ahead[i] = d
end
for j = 1, nc do
  local key = KEYS[nr + j]
  local cap = tonumber(ARGV[a])
  local dim = tonumber(ARGV[a + 1])
  a = a + 2
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now_us)
  if redis.call('ZCARD', key) >= cap then
    return {0, dim, -1}
  end
end
for i = 1, nr do
  local x = now_ns + ahead[i]
  local s = math.floor(x / 1e9)
  local px = math.floor(ahead[i] / 1e6) + 1
  if fed then px = 60000 end
  redis.call('SET', KEYS[i], string.format('%d %.17g', now_s + s, x - s * 1e9), 'PX', px)
end
for j = 1, nc do
  local key = KEYS[nr + j]
  redis.call('ZADD', key, now_us + ttl, lease)
  redis.call('PEXPIRE', key, math.floor(ttl / 1000) + 1000)
end
return {1, 0, now_us}
`)

// renewScript pushes the expiry of held leases: KEYS[i] holds lease ARGV[i+1];
// ARGV[1] is the TTL in µs. Leases already gone (expired) stay gone.
var renewScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local ttl = tonumber(ARGV[1])
for i = 1, #KEYS do
  if redis.call('ZSCORE', KEYS[i], ARGV[i + 1]) then
    redis.call('ZADD', KEYS[i], 'XX', now + ttl, ARGV[i + 1])
    redis.call('PEXPIRE', KEYS[i], math.floor(ttl / 1000) + 1000)
  end
end
return 0
`)
