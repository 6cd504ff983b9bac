-- renew.lua: the watchdog's lease renewal for the hash locks (reentrant and fair).
-- KEYS[1]  the lock hash
-- ARGV[1]  owner (process id .. "-" .. goroutine id)
-- ARGV[2]  new lease in milliseconds
-- Returns 1 when the owner still holds the lock and its lease was reset, 0 when the lock is
-- gone or someone else's: the holder has lost it and must stop work.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
