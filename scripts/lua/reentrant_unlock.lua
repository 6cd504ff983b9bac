-- reentrant_unlock.lua: release one hold of a ReentrantLock.
-- KEYS[1]  the lock hash
-- KEYS[2]  the lock's release channel
-- ARGV[1]  owner (process id .. "-" .. goroutine id)
-- ARGV[2]  process id of the caller
-- ARGV[3]  unused (fair_unlock.lua's grant counter lifetime: both scripts are called alike)
-- ARGV[4]  absent for an Unlock; for the cleanup after an attempt that failed (its reply
--          lost), the hold count that attempt made: one hold is given back only when the
--          caller's count is exactly that, so that the cleanup undoes the attempt's grant or
--          re-entry if it ran, and never a hold from before it. Else the count is returned.
-- Returns -1 when the caller does not hold the lock (expired, or never taken: Java's
-- IllegalMonitorStateException), the remaining hold count (>= 1) after one release, or 0 when
-- that was the last hold: the hash is deleted and " " .. process id (no new holder, released
-- by the caller's process) is published on KEYS[2]. It wakes a waiter in every other
-- subscribed process; the caller's own process wakes its waiter directly.
local n = tonumber(redis.call('HGET', KEYS[1], ARGV[1]))
if not n then
  return -1
end
if ARGV[4] and n ~= tonumber(ARGV[4]) then
  return n
end
if n > 1 then
  return redis.call('HINCRBY', KEYS[1], ARGV[1], -1)
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', KEYS[2], ' ' .. ARGV[2])
return 0
