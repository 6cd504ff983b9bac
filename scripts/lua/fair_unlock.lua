-- fair_unlock.lua: release one hold of a FairLock; at the last hold hand the lock straight to
-- the first live waiter, so that it need not ask again.
-- KEYS[1..6]  as in fair_lock.lua: hash, queue, deadlines, leases, channel, grant counter
--             (a handover is a grant: it increments the counter)
-- ARGV[1]     owner (process id .. "-" .. goroutine id)
-- ARGV[2]     process id of the caller
-- ARGV[3]     how long the grant counter outlives a grant (a handover), in milliseconds
-- ARGV[4]     absent for an Unlock; for the cleanup after an attempt that failed (its reply
--             lost), the hold count that attempt made: one hold is given back only when the
--             caller's count is exactly that (else the count is returned), as in
--             reentrant_unlock.lua
-- Returns -1 when the caller does not hold the lock, the remaining hold count (>= 1), or 0
-- when it was released to nobody. On release the first waiter whose deadline has not passed
-- becomes the holder (hold count 1, its own lease) and its owner .. "/" .. its ticket .. "#"
-- .. its fencing token is returned (a string). A waiter of the caller's own process is woken
-- by the caller; for any other, that string .. " " .. the caller's process id is published on
-- KEYS[5].

-- grant increments a grant counter and keeps it ttl ms longer. One that Redis lost (restarted
-- empty) or let expire (no grant for ttl) starts again at the server's clock in microseconds,
-- above every token issued before. INCR tells which: it answers 1 only for a counter that did
-- not exist, since a live one counts from a clock value. (One INCR in the usual case, where an
-- EXISTS before it would cost a call on every grant.)
local function grant(key, ttl)
  local token = redis.call('INCR', key)
  if token == 1 then
    local t = redis.call('TIME')
    redis.call('SET', key, t[1] .. string.format('%06d', tonumber(t[2])), 'PX', ttl)
    return redis.call('INCR', key)
  end
  redis.call('PEXPIRE', key, ttl)
  return token
end

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
local now
while true do
  local head = redis.call('LPOP', KEYS[2])
  if not head then
    return 0
  end
  if not now then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  local deadline = redis.call('ZSCORE', KEYS[3], head)
  local lease, ticket = string.match(redis.call('HGET', KEYS[4], head) or '', '^(%d+)/(%d+)$')
  redis.call('ZREM', KEYS[3], head)
  redis.call('HDEL', KEYS[4], head)
  if deadline and lease and tonumber(deadline) >= now then
    redis.call('HSET', KEYS[1], head, 1)
    redis.call('PEXPIRE', KEYS[1], lease)
    -- The handover names the wait and carries its fencing token ("#" .. token): the new
    -- holder starts work without asking Redis, so it learns its token here (in integer
    -- digits: `..` prints a number above 10^14 in exponent form).
    local wait = head .. '/' .. ticket .. '#' .. string.format('%d', grant(KEYS[6], ARGV[3]))
    -- A waiter of the caller's own process is woken by the caller: no message needed.
    if string.sub(head, 1, #ARGV[2] + 1) ~= ARGV[2] .. '-' then
      redis.call('PUBLISH', KEYS[5], wait .. ' ' .. ARGV[2])
    end
    return wait
  end
end
