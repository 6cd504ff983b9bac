-- registry_extend.lua: keep the remote half of a LocalRemoteLock (watchdog renewal, and the
-- check made when one local goroutine hands the lock to the next).
-- KEYS[1]  the lock key
-- ARGV[1]  process id
-- ARGV[2]  new lease in milliseconds
-- Returns 1 when the key is still the process's and its lease runs at least ARGV[2] ms from
-- now, 0 when it was lost.
--
-- The lease is lengthened, never shortened (PEXPIRE GT, Redis 7.0; the key always has an
-- expiry): a request whose reply was lost may land after a later one, and a watchdog renewal
-- with a short lease landing after a handoff's extension with a long one would cut the key
-- back under the next holder, whose deadline counts on the extension. Ever longer, the key's
-- expiry is never earlier than the last request the process saw succeed set it.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2], 'GT')
  return 1
end
return 0
