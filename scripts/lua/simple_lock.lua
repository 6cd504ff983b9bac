-- simple_lock.lua: take a SimpleRedisLock (SET key owner NX PX lease) and, when taken, hand
-- the holder its fencing token: the next value of the name's grant counter.
-- KEYS[1]  the lock key ("lock:" .. name)
-- KEYS[2]  the name's grant counter, in the lock key's hash slot ("{lock:" .. name .. "}:fence",
--          or the lock key .. ":fence" when the lock key has a hash tag of its own)
-- ARGV[1]  owner (process id .. "-" .. goroutine id)
-- ARGV[2]  lease in milliseconds
-- Returns the token (>= 1) when the caller now holds the lock, 0 when another owner holds it.
-- The counter has no expiry: every grant of the name, a takeover after the last holder's
-- lease ran out too, gets a larger token than every grant before it.
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 0
end
return redis.call('INCR', KEYS[2])
