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
// One call decides a batch of m requests, in order, each atomically (all
// its dimensions admit, or nothing is written), exactly as m calls in a row
// would: batching saves Redis the per-command work, not any check.
//
// KEYS: per request, its nr GCRA keys then its nc lease sets.
// ARGV: m; now ("" for Redis TIME, or ns since the epoch in decimal: tests
// feed request times, and keys then expire after 60 s of Redis time instead
// of when the bucket is full again, which only Redis's own clock can tell);
// lease TTL (µs); then per request: nr, nc, lease id, then per GCRA key:
// emission interval T (ns), tolerance tau = T·burst (ns), dimension index;
// then per lease set: max in flight, dimension index.
// Reply: now_µs, then per request {1, 0, 0} admitted, {0, dim,
// retry_after_ns} rate-limited, {0, dim, -1} concurrency-limited.
var admitScript = redis.NewScript(`
local now_s, now_ns
local fed = ARGV[2] ~= ''
if fed then
  now_s = tonumber(string.sub(ARGV[2], 1, -10))
  now_ns = tonumber(string.sub(ARGV[2], -9))
else
  local t = redis.call('TIME')
  now_s = tonumber(t[1])
  now_ns = tonumber(t[2]) * 1000
end
local now_us = now_s * 1000000 + math.floor(now_ns / 1000)
local ttl = tonumber(ARGV[3])
local out = {now_us}
local k = 0
local a = 4
local ahead = {}
for r = 1, tonumber(ARGV[1]) do
  local nr = tonumber(ARGV[a])
  local nc = tonumber(ARGV[a + 1])
  local lease = ARGV[a + 2]
  a = a + 3
  local code, dim, val = 1, 0, 0
  for i = 1, nr do
    if code == 1 then
      local T = tonumber(ARGV[a])
      local tau = tonumber(ARGV[a + 1])
      local d = 0
      local v = redis.call('GET', KEYS[k + i])
      if v then
        local sp = string.find(v, ' ', 1, true)
        if sp then
          d = (tonumber(string.sub(v, 1, sp - 1)) - now_s) * 1e9 + (tonumber(string.sub(v, sp + 1)) - now_ns)
        end
        if not (d > 0) then d = 0 end
      end
      d = d + T
      if d > tau then
        code, dim, val = 0, tonumber(ARGV[a + 2]), math.min(math.ceil(d - tau), 9e18)
      end
      ahead[i] = d
    end
    a = a + 3
  end
  for j = 1, nc do
    if code == 1 then
      local key = KEYS[k + nr + j]
      redis.call('ZREMRANGEBYSCORE', key, '-inf', now_us)
      if redis.call('ZCARD', key) >= tonumber(ARGV[a]) then
        code, dim, val = 0, tonumber(ARGV[a + 1]), -1
      end
    end
    a = a + 2
  end
  if code == 1 then
    for i = 1, nr do
      local x = now_ns + ahead[i]
      local s = math.floor(x / 1e9)
      local px = math.floor(ahead[i] / 1e6) + 1
      if fed then px = 60000 end
      redis.call('SET', KEYS[k + i], string.format('%d %.17g', now_s + s, x - s * 1e9), 'PX', px)
    end
    for j = 1, nc do
      local key = KEYS[k + nr + j]
      redis.call('ZADD', key, now_us + ttl, lease)
      redis.call('PEXPIRE', key, math.floor(ttl / 1000) + 1000)
    end
  end
  out[#out + 1] = code
  out[#out + 1] = dim
  out[#out + 1] = val
  k = k + nr + nc
end
return out
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
