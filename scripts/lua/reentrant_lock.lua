-- reentrant_lock.lua: take or re-enter a ReentrantLock, a hash whose one field is the owner
-- and whose value is that owner's hold count (Redisson's RLock).
-- KEYS[1]  the lock hash ("lock:{" .. name .. "}:reentrant")
-- KEYS[2]  the name's grant counter (KEYS[1] .. ":fence"), kept ARGV[3] ms after each grant
-- ARGV[1]  owner (process id .. "-" .. goroutine id)
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  how long the grant counter outlives a grant, in milliseconds
-- ARGV[4]  '1' when the caller holds no hold of the lock by its process's record: an owner's
--          field found then is what a hold the caller was told is over left behind (its last
--          release never reached Redis, or it was reported lost while its lease ran on), and
--          the attempt is a new grant of one hold, not a re-entry; '0' otherwise
-- Returns {1, fencing token} when the caller now holds the lock by a new grant, which
-- increments the counter; {hold count (>= 2), 0} on a re-entry, which keeps the token its
-- caller got with the grant. Else {minus the lock's remaining time to live in milliseconds
-- (<= -1), 0} when another owner holds it, so that the caller knows how long it may have to
-- wait if no release message reaches it.

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

-- PTTL answers -2 for a free lock, and the wait of a taken one: one call for both.
local ttl = redis.call('PTTL', KEYS[1])
if ttl == -2 then
  redis.call('HSET', KEYS[1], ARGV[1], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, grant(KEYS[2], ARGV[3])}
end
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  if ARGV[4] == '1' then
    -- Counted as a re-entry, the leftover holds would outlive the caller's one Unlock, and
    -- its process, keeping no record of them, would renew nothing and report no token.
    redis.call('HSET', KEYS[1], ARGV[1], 1)
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return {1, grant(KEYS[2], ARGV[3])}
  end
  local n = redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
  -- A re-entry may lengthen the lease, never shorten it: the outer hold (its watchdog, or
  -- its fixed lease's timer) counts on the lease it set.
  if ttl < tonumber(ARGV[2]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
  end
  return {n, 0}
end
if ttl < 1 then ttl = 1 end
return {-ttl, 0}
