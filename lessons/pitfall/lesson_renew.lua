-- lesson_renew.lua: extend a token lock's lease, but only the caller's own (the watchdog's
-- renewal in the short-TTL lesson). Not scripts/lua/renew.lua, which renews a hash lock.
-- KEYS[1]  the lock key
-- ARGV[1]  the token the caller believes it holds
-- ARGV[2]  the new lease in milliseconds
-- Returns 1 when the key held ARGV[1] and its TTL was reset, 0 when the lease was already
-- lost (expired, maybe taken by someone else): a watchdog must never resurrect a lost lock.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
