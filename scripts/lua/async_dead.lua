-- async_dead.lua: give up an order the writer could not write: move its entry to the
-- dead-letter stream and release its reservation, in one step.
-- KEYS[1]  the voucher's order stream   KEYS[2]  the dead-letter stream   KEYS[3]  the sale hash
-- KEYS[4]  the users hash   KEYS[5]  the orders hash   KEYS[6]  the attempts hash
-- ARGV[1]  group   ARGV[2]  consumer   ARGV[3]  entry id   ARGV[4]  order id   ARGV[5]  user id
-- ARGV[6]  voucher id   ARGV[7]  admitted at (ms)   ARGV[8]  reason
-- ARGV[9]  what the database's refusal says of the order's unit: 'free' (the database holds no
--          unit for it, e.g. its user has another row) or 'short' (the database's stock could
--          not cover it)
-- Returns 0 when the entry is no longer this consumer's (another consumer claimed it, or wrote
-- and acknowledged it): then nothing changes. Otherwise it dead-lettered the entry and returns
-- what became of the reservation's unit, which the dead letter also records as 'unit':
--   'returned'  added back to the sale hash's stock;
--   'kept'      a 'short' refusal while the stock is zero or more: the database has no unit for
--               the order (Redis counted more than it holds), and a unit given back would admit
--               another buyer that the database refuses too; kept, Redis's count comes down to
--               the database's by one, and the reconcile drift by one;
--   'none'      no sale hash (it is loaded from the database, which never counted this order,
--               and async_load.lua gives back the unit of an order it counted pending), or no
--               order id (a malformed entry).
-- A 'short' refusal still gives the unit back while the stock is below zero: a stock loaded
-- as the database's stock less the orders pending (async_load.lua) is below zero when the
-- database cannot cover them all, and it already counts this order's unit as owed; the unit
-- back only settles that debt and never brings the stock above zero, so it admits nobody.
if ARGV[9] ~= 'free' and ARGV[9] ~= 'short' then
  return redis.error_reply('async_dead: ARGV[9] must be free or short, got ' .. tostring(ARGV[9]))
end
local owner = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1)
if #owner == 0 or owner[1][2] ~= ARGV[2] then
  return 0
end
local unit = 'none'
if ARGV[4] ~= '' and redis.call('EXISTS', KEYS[3]) == 1 then
  if ARGV[9] == 'free' or tonumber(redis.call('HGET', KEYS[3], 'stock')) < 0 then
    redis.call('HINCRBY', KEYS[3], 'stock', 1)
    unit = 'returned'
  else
    unit = 'kept'
  end
end
redis.call('XADD', KEYS[2], '*', 'order', ARGV[4], 'user', ARGV[5], 'voucher', ARGV[6], 'at', ARGV[7],
  'entry', ARGV[3], 'reason', ARGV[8], 'unit', unit)
redis.call('XACK', KEYS[1], ARGV[1], ARGV[3])
redis.call('XDEL', KEYS[1], ARGV[3])
redis.call('HDEL', KEYS[6], ARGV[3])
if ARGV[4] ~= '' then
  if redis.call('HGET', KEYS[4], ARGV[5]) == ARGV[4] then
    redis.call('HDEL', KEYS[4], ARGV[5])
  end
  redis.call('HSET', KEYS[5], ARGV[4], 'failed|' .. ARGV[5] .. '|' .. ARGV[7] .. '|' .. ARGV[8])
end
return unit
