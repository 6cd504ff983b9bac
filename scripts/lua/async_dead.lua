-- async_dead.lua: give up an order the writer could not write: move its entry to the
-- dead-letter stream and release its reservation, in one step.
-- KEYS[1]  the voucher's order stream   KEYS[2]  the dead-letter stream   KEYS[3]  the sale hash
-- KEYS[4]  the users hash   KEYS[5]  the orders hash   KEYS[6]  the attempts hash
-- ARGV[1]  group   ARGV[2]  consumer   ARGV[3]  entry id   ARGV[4]  order id   ARGV[5]  user id
-- ARGV[6]  voucher id   ARGV[7]  admitted at (ms)   ARGV[8]  reason
-- Returns 1 when it dead-lettered the entry, 0 when the entry is no longer this consumer's
-- (another consumer claimed it, or wrote and acknowledged it): then nothing changes.
-- The unit goes back only into a sale hash that exists: one missing is loaded from the
-- database, which never counted this order.
local owner = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1)
if #owner == 0 or owner[1][2] ~= ARGV[2] then
  return 0
end
redis.call('XADD', KEYS[2], '*', 'order', ARGV[4], 'user', ARGV[5], 'voucher', ARGV[6], 'at', ARGV[7],
  'entry', ARGV[3], 'reason', ARGV[8])
redis.call('XACK', KEYS[1], ARGV[1], ARGV[3])
redis.call('XDEL', KEYS[1], ARGV[3])
redis.call('HDEL', KEYS[6], ARGV[3])
if ARGV[4] ~= '' then
  if redis.call('EXISTS', KEYS[3]) == 1 then
    redis.call('HINCRBY', KEYS[3], 'stock', 1)
  end
  if redis.call('HGET', KEYS[4], ARGV[5]) == ARGV[4] then
    redis.call('HDEL', KEYS[4], ARGV[5])
  end
  redis.call('HSET', KEYS[5], ARGV[4], 'failed|' .. ARGV[5] .. '|' .. ARGV[7] .. '|' .. ARGV[8])
end
return 1
