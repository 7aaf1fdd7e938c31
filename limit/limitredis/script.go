package limitredis

import "github.com/redis/go-redis/v9"

// admitScript checks and commits every dimension of one request at once,
// with the server's clock (microseconds).
//
// KEYS: nr GCRA keys, then nc lease sets.
// ARGV: nr, nc, lease id, lease TTL (µs), then per GCRA key: emission
// interval T (µs), tolerance tau (µs), dimension index; then per lease set:
// max in flight, dimension index.
// Reply: {1, 0, now_µs} admitted; {0, dim, retry_after_µs} rate-limited;
// {0, dim, -1} concurrency-limited.
var admitScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local nr = tonumber(ARGV[1])
local nc = tonumber(ARGV[2])
local lease = ARGV[3]
local ttl = tonumber(ARGV[4])
local a = 5
local newtat = {}
for i = 1, nr do
  local T = tonumber(ARGV[a])
  local tau = tonumber(ARGV[a + 1])
  local dim = tonumber(ARGV[a + 2])
  a = a + 3
  local tat = tonumber(redis.call('GET', KEYS[i]) or '0')
  if tat < now then tat = now end
  local nt = tat + T
  if nt - now > tau then
    return {0, dim, nt - now - tau}
  end
  newtat[i] = nt
end
for j = 1, nc do
  local key = KEYS[nr + j]
  local cap = tonumber(ARGV[a])
  local dim = tonumber(ARGV[a + 1])
  a = a + 2
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  if redis.call('ZCARD', key) >= cap then
    return {0, dim, -1}
  end
end
for i = 1, nr do
  redis.call('SET', KEYS[i], string.format('%d', newtat[i]), 'PX', math.floor((newtat[i] - now) / 1000) + 1)
end
for j = 1, nc do
  local key = KEYS[nr + j]
  redis.call('ZADD', key, now + ttl, lease)
  redis.call('PEXPIRE', key, math.floor(ttl / 1000) + 1000)
end
return {1, 0, now}
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
