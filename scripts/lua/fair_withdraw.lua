-- fair_withdraw.lua: a FairLock waiter gives up (its wait ran out or its context ended).
-- KEYS[1..6]  as in fair_lock.lua: hash, queue, deadlines, leases, channel, grant counter
-- ARGV[1]     owner (process id .. "-" .. goroutine id)
-- ARGV[2]     lease in ms to set again when the caller holds the lock and keeps it (its wait
--             ran out just as it was handed over: the caller cannot date the handover, so
--             its lease starts again now); 0 leaves the lease alone
-- Returns the caller's fencing token (the grant counter, >= 1) when the lock had already been
-- handed to the caller (it holds it and must release it or keep it), else 0 after removing
-- the caller from the queue.
redis.call('LREM', KEYS[2], 0, ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  if tonumber(ARGV[2]) > 0 then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
  end
  return math.max(tonumber(redis.call('GET', KEYS[6]) or 1), 1)
end
return 0
