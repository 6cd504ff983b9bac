-- reentrant_lock.lua: take or re-enter a reentrant lock (article 001's Redisson design: a
-- hash whose one field is the owner and whose value is the hold count).
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
