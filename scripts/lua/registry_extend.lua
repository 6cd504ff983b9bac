-- registry_extend.lua: keep the remote half of a LocalRemoteLock (watchdog renewal, and the
-- check made when one local goroutine hands the lock to the next).
-- KEYS[1]  the lock key
-- ARGV[1]  process id
-- ARGV[2]  new lease in milliseconds
-- Returns 1 when the key is still the process's and its lease was reset, 0 when it was lost.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
