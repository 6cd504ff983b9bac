-- registry_obtain.lua: take the remote half of a LocalRemoteLock (after Spring's
-- RedisLockRegistry). Only one goroutine per process gets here at a time (the local lock is in
-- front), so the value is the process id alone.
-- KEYS[1]  the lock key ("lock:{" .. name .. "}:registry")
-- KEYS[2]  the name's grant counter (KEYS[1] .. ":fence"), kept ARGV[3] ms after each grant
-- ARGV[1]  process id
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  how long the grant counter outlives a grant, in milliseconds
-- Returns {1, fencing token} when the process now holds the key: new (the counter's next
-- value), or already its own (lease reset, token kept; a new grant if the counter expired while
-- the process held the key). Else {minus the key's remaining time
-- to live in ms (<= -1), 0}.

-- grant increments a grant counter and keeps it ttl ms longer. One that Redis lost (restarted
-- empty) or let expire (no grant for ttl) starts again at the server's clock in microseconds,
-- above every token issued before. INCR tells which: it answers 1 only for a counter that did
-- not exist, since a live one counts from a clock value. (One INCR in the usual case, where an
-- EXISTS before it would cost a call on every grant.)
local function grant(key, ttl)
  local token = redis.call('INCR', key)
  if token == 1 then
    local t = redis.call('TIME')
    redis.call('SET', key, t[1] .. string.format('%06d', tonumber(t[2])), 'PX', ttl)
    return redis.call('INCR', key)
  end
  redis.call('PEXPIRE', key, ttl)
  return token
end

-- SET NX with GET (Redis 7.0) takes a free key and reads a taken one in one call.
local v = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2], 'GET')
if not v then
  return {1, grant(KEYS[2], ARGV[3])}
end
if v == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, tonumber(redis.call('GET', KEYS[2])) or grant(KEYS[2], ARGV[3])}
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 1 then ttl = 1 end
return {-ttl, 0}
