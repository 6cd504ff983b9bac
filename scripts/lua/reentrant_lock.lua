-- reentrant_lock.lua: take or re-enter a ReentrantLock, a hash whose one field is the owner
-- and whose value is that owner's hold count (Redisson's RLock).
-- KEYS[1]  the lock hash ("lock:{" .. name .. "}:reentrant")
-- ARGV[1]  owner (process id .. "-" .. goroutine id)
-- ARGV[2]  lease in milliseconds
-- Returns the caller's hold count (>= 1) when it now holds the lock, or minus the lock's
-- remaining time to live in milliseconds (<= -1) when another owner holds it, so that the
-- caller knows how long it may have to wait if no release message reaches it.
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  local n = redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return n
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 1 then ttl = 1 end
return -ttl
