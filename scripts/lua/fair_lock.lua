-- fair_lock.lua: take, re-enter or queue for a FairLock (first come, first served across
-- processes). The lock itself is a hash like a ReentrantLock's; waiters queue in a list, and a
-- sorted set holds the time by which each waiter must have refreshed its place, so that a
-- waiter that died is dropped instead of blocking the queue.
-- KEYS[1]  the lock hash ("lock:{" .. name .. "}:fair")
-- KEYS[2]  the waiters' queue (list of owners, oldest first)
-- KEYS[3]  the waiters' deadlines (sorted set: owner -> server time in ms)
-- KEYS[4]  the waiters' leases (hash: owner -> lease in ms to grant with .. "/" .. ticket)
-- KEYS[5]  the lock's channel: a handover publishes the new holder's owner .. "/" .. ticket
--          .. "#" .. its fencing token .. " " (.. the releasing process id, when a release
--          made it)
-- KEYS[6]  the name's grant counter (KEYS[1] .. ":fence"), kept ARGV[7] ms: every grant, a
--          handover too, increments it
-- ARGV[1]  owner (process id .. "-" .. goroutine id)
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  lease to grant with if the lock is handed over while queued
-- ARGV[4]  waiter timeout in ms: queue (or refresh the caller's place) for this long; 0 = try
--          once and do not queue
-- ARGV[5]  '1' when the caller is already queued: if it holds the lock it was handed over to
--          it (its message may have been lost), so do not count it as re-entry
-- ARGV[6]  the caller's ticket: a number naming this wait among all the waits of its process.
--          A handover names the waiter by owner and ticket, because one goroutine (one owner)
--          waits again and again: a handover to an earlier wait, reaching it late, must not
--          pass for a handover to the current one.
-- ARGV[7]  how long the grant counter outlives a grant, in milliseconds
-- ARGV[8]  '1' when the caller holds no hold of the lock by its process's record: outside a
--          handover (ARGV[5]), an owner's field found then is what a hold the caller was told
--          is over left behind, and the attempt is a new grant of one hold, not a re-entry, as
--          in reentrant_lock.lua; '0' otherwise
-- Returns {1, fencing token} when the caller holds the lock by a new grant or a handover (for
-- a handover the token is the counter's value: no other grant can move it while the caller
-- holds the lock); {hold count (>= 2), 0} on a re-entry, which keeps the token its caller got
-- with the grant; else {minus the lock's remaining time to live in ms (<= -1), 0}.

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

-- clock returns the server's time in ms, read once per run.
local now
local function clock()
  if not now then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return now
end
-- The queue, its deadlines and its leases hold the same waiters (every script adds and removes
-- a waiter in all three, and gives them one expiry), so a queue exists only with its deadlines.
local queued = redis.call('EXISTS', KEYS[3]) == 1
if queued then
  for _, w in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', clock())) do
    redis.call('LREM', KEYS[2], 0, w)
    redis.call('ZREM', KEYS[3], w)
    redis.call('HDEL', KEYS[4], w)
  end
end
-- PTTL answers -2 for a free lock, and the wait of a taken one: one call for both.
local ttl = redis.call('PTTL', KEYS[1])
if ttl == -2 then
  local head = queued and redis.call('LINDEX', KEYS[2], 0)
  if (not head) or head == ARGV[1] then
    if head then
      redis.call('LPOP', KEYS[2])
      redis.call('ZREM', KEYS[3], head)
      redis.call('HDEL', KEYS[4], head)
    end
    redis.call('HSET', KEYS[1], ARGV[1], 1)
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return {1, grant(KEYS[6], ARGV[7])}
  end
  -- Free, but a live waiter is first (the holder expired, or a message was lost): hand it over.
  redis.call('LPOP', KEYS[2])
  redis.call('ZREM', KEYS[3], head)
  local lease, ticket = string.match(redis.call('HGET', KEYS[4], head) or '', '^(%d+)/(%d+)$')
  redis.call('HDEL', KEYS[4], head)
  redis.call('HSET', KEYS[1], head, 1)
  ttl = tonumber(lease or ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ttl)
  local token = grant(KEYS[6], ARGV[7])
  -- Without its lease entry (expired) the waiter learns of it at its next refresh. The
  -- message carries the handover's fencing token, as fair_unlock.lua's does, in integer
  -- digits: `..` would print a clock-based token (above 10^14) as 1.7956807359265e+15.
  if ticket then
    redis.call('PUBLISH', KEYS[5], head .. '/' .. ticket .. '#' .. string.format('%d', token) .. ' ')
  end
elseif redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  if ARGV[5] == '1' then
    -- Handed over while the caller slept: its lease ran from the handover, which the caller
    -- cannot date. It starts again now, so that the caller's timer (from this attempt) is
    -- not later than Redis's expiry.
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
    return {1, tonumber(redis.call('GET', KEYS[6]) or 0)}
  end
  if ARGV[8] == '1' then
    -- A leftover of a hold that is over for the caller (see ARGV[8]): one hold, a new grant.
    redis.call('HSET', KEYS[1], ARGV[1], 1)
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return {1, grant(KEYS[6], ARGV[7])}
  end
  local n = redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
  -- A re-entry may lengthen the lease, never shorten it: the outer hold (its watchdog, or
  -- its fixed lease's timer) counts on the lease it set.
  if ttl < tonumber(ARGV[2]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
  end
  return {n, 0}
end
if tonumber(ARGV[4]) > 0 then
  -- ZADD counts the members it added: the caller joins the queue's end only if it was not in.
  if redis.call('ZADD', KEYS[3], clock() + tonumber(ARGV[4]), ARGV[1]) == 1 then
    redis.call('RPUSH', KEYS[2], ARGV[1])
  end
  redis.call('HSET', KEYS[4], ARGV[1], ARGV[3] .. '/' .. ARGV[6])
  -- Every refresh pushes the queue's expiry past the latest deadline, so a queue whose
  -- waiters all died disappears on its own.
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
  redis.call('PEXPIRE', KEYS[3], ARGV[4])
  redis.call('PEXPIRE', KEYS[4], ARGV[4])
end
if ttl < 1 then ttl = 1 end
return {-ttl, 0}
