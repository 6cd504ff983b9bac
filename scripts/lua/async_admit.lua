-- async_admit.lua: admit one order of a seckill voucher in the asynchronous mode, atomically.
-- Every key is passed in KEYS and all of them carry the voucher's hash tag {voucher:ID}, so the
-- script runs unchanged on Redis Cluster; no key is built here.
-- KEYS[1]  the sale hash {stock, begin, end}: units left, the window in ms since the Unix epoch
-- KEYS[2]  the users hash: user id -> order id of every user holding an order of the voucher
-- KEYS[3]  the orders hash: order id -> "pending|user|at" while the order is not in the database
-- KEYS[4]  the voucher's order stream, read by the writers' consumer group
-- ARGV[1]  user id    ARGV[2]  order id    ARGV[3]  voucher id    ARGV[4]  now, ms since the epoch
-- Returns {code, order id}: {0, ARGV[2]} admitted; {1, ''} the sale hash is missing (load it from
-- the database and try again); {2, ''} outside the sale window; {3, id} the user already holds
-- order id; {4, ''} sold out; {5, ''} the orders hash already holds the order id: void (this call
-- ran after the caller gave up on its answer and settled the admission as not admitted,
-- async_settle.lua), or admitted by an earlier run of the same call (which the caller settles
-- as admitted).
-- Ids stay strings: order ids exceed 2^53, past what a Lua number holds exactly.
-- The duplicate check comes before the stock is touched, so a repeated request never takes a unit.
local sale = redis.call('HMGET', KEYS[1], 'stock', 'begin', 'end')
if not sale[1] then
  return {1, ''}
end
if redis.call('HEXISTS', KEYS[3], ARGV[2]) == 1 then
  return {5, ''}
end
local now = tonumber(ARGV[4])
if now < tonumber(sale[2]) or now >= tonumber(sale[3]) then
  return {2, ''}
end
local earlier = redis.call('HGET', KEYS[2], ARGV[1])
if earlier then
  return {3, earlier}
end
if tonumber(sale[1]) <= 0 then
  return {4, ''}
end
redis.call('HINCRBY', KEYS[1], 'stock', -1)
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[3], ARGV[2], 'pending|' .. ARGV[1] .. '|' .. ARGV[4])
redis.call('XADD', KEYS[4], '*', 'order', ARGV[2], 'user', ARGV[1], 'voucher', ARGV[3], 'at', ARGV[4])
return {0, ARGV[2]}
