-- fence_reseed.lua: give a SimpleRedisLock's grant a token above every earlier one when its
-- MULTI found the name's grant counter gone (Redis restarted empty, failed over to a replica
-- that had not received it, or the counter expired a day after the last grant): INCR started
-- it again at 1. The counter starts again from Redis's clock in microseconds, as the other
-- locks' scripts do, never from the asking instance's, whose clock may be behind the one that
-- seeded the lost counter.
-- KEYS[1]  the lock key ("lock:" .. name)
-- KEYS[2]  the name's grant counter
-- ARGV[1]  the owner value the grant set in KEYS[1]
-- ARGV[2]  how long the grant counter outlives a grant, in milliseconds
-- ARGV[3]  the grant's lease, in milliseconds
-- Returns the grant's token, or 0 when another owner holds KEYS[1] (the grant's lease ran out
-- before this script and another owner took the lock).
local holder = redis.call('GET', KEYS[1])
if holder == false then
  -- The lease ran out before this script (the caller was starved between its round trips
  -- for longer than the lease): nobody holds the lock, so take it again, with a whole lease.
  -- Answering 0 would tell the caller that another owner holds it.
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
elseif holder ~= ARGV[1] then
  return 0
end
local t = redis.call('TIME')
local seed = t[1] .. string.format('%06d', tonumber(t[2]))
-- Never move it back: while the caller holds the lock no other grant reseeds it, but the
-- counter may already be past the clock (a later INCR than the caller's found it reseeded).
if (tonumber(redis.call('GET', KEYS[2])) or 0) < tonumber(seed) then
  redis.call('SET', KEYS[2], seed)
end
local token = redis.call('INCR', KEYS[2])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return token
