-- lesson_reentrant_unlock.lua: leave the reentrancy lesson's lock once. Not
-- scripts/lua/reentrant_unlock.lua: it publishes nothing, and answers 1 when it deletes.
-- KEYS[1]  the lock key
-- ARGV[1]  the owner (process id .. "-" .. goroutine id)
-- ARGV[2]  the lease in milliseconds, renewed while holds remain
-- Returns 1 when the last hold was released and the key deleted, 0 when holds remain, and
-- -1 when the caller does not hold the lock.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return -1
end
if redis.call('HINCRBY', KEYS[1], ARGV[1], -1) > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 0
end
redis.call('DEL', KEYS[1])
return 1
