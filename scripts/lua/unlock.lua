-- unlock.lua: compare-and-delete release of a SimpleRedisLock.
-- KEYS[1]  the lock key ("lock:" .. name)
-- ARGV[1]  the owner value the caller believes it holds (process UUID .. "-" .. goroutine id)
-- Returns 1 when the key held ARGV[1] and was deleted, 0 when it was absent or held by
-- someone else (expired, then taken). GET and DEL run as one script, so no other client can
-- slip a SET between the owner check and the delete.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
