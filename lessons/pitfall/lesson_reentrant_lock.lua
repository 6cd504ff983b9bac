-- lesson_reentrant_lock.lua: take or re-enter the reentrancy lesson's lock (Redisson's
-- design cut to its core: a hash whose one field is the owner and whose value is the hold
-- count). Not scripts/lua/reentrant_lock.lua: it answers 0, not -PTTL, when refused.
-- KEYS[1]  the lock key
-- ARGV[1]  the owner (process id .. "-" .. goroutine id)
-- ARGV[2]  the lease in milliseconds
-- Returns the owner's hold count after this call (1 = taken, 2+ = re-entered), or 0 when
-- another owner holds the lock.
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  local n = redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return n
end
return 0
