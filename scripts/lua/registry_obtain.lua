-- registry_obtain.lua: take the remote half of a LocalRemoteLock (after Spring's
-- RedisLockRegistry). Only one goroutine per process gets here at a time (the local lock is in
-- front), so the value is the process id alone.
-- KEYS[1]  the lock key ("lock:{" .. name .. "}:registry")
-- ARGV[1]  process id
-- ARGV[2]  lease in milliseconds
-- Returns 1 when the process now holds the key (new, or already its own: lease reset), else
-- minus the key's remaining time to live in ms (<= -1).
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if not v then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 1 then ttl = 1 end
return -ttl
