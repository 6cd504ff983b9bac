-- async_retire.lua: retire a voucher whose sale is over: delete its users hash, orders hash,
-- stream (with its consumer group), dead-letter stream and attempts hash, in one step, only if
-- nothing in them can still be needed from Redis. Every key is passed in KEYS and all of them
-- carry the voucher's hash tag, so the script runs on Redis Cluster.
-- KEYS[1]  the sale hash   KEYS[2]  the users hash   KEYS[3]  the orders hash
-- KEYS[4]  the voucher's order stream   KEYS[5]  its dead-letter stream   KEYS[6]  the attempts hash
-- ARGV[1]  cutoff, ms since the epoch: only a sale that ended at or before it is retired
-- ARGV[2]  now, ms since the epoch: recorded as the sale hash's 'retired' field
-- ARGV[3]  how many dead letters the caller copied to the database (async_failed_orders)
-- Returns 1 when it retired the voucher now, 2 when the sale hash says it was retired before,
-- 0 when it must stay: no sale hash (a load may be under way), the sale ended after the cutoff
-- (or not at all), an order still in the stream (admitted and not yet written or given up:
-- pending), or a dead letter the caller did not copy (its failed status would be lost).
-- The sale hash stays, marked retired: an admission after the sale is refused by its window
-- without a reload from the database, and reconcile still reads its stock. The users hash goes:
-- the sale can no longer admit, so nobody asks it whether a user holds an order.
local sale = redis.call('HMGET', KEYS[1], 'end', 'retired')
if not sale[1] then
  return 0
end
if sale[2] then
  return 2
end
if tonumber(sale[1]) > tonumber(ARGV[1]) then
  return 0
end
if redis.call('XLEN', KEYS[4]) > 0 then
  return 0
end
if redis.call('XLEN', KEYS[5]) ~= tonumber(ARGV[3]) then
  return 0
end
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
redis.call('HSET', KEYS[1], 'retired', ARGV[2])
return 1
