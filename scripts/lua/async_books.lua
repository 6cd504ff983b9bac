-- async_books.lua: one consistent look at a voucher's books in Redis, for reconcile and reload.
-- KEYS[1]  the sale hash   KEYS[2]  the voucher's order stream   KEYS[3]  its dead-letter stream
-- KEYS[4], ARGV[1]  (a loader's, optional) the orders hash and the load's token: the field
--          'load:' .. token is set there in the same step, for async_load.lua to find again; gone
--          by then, Redis lost what this step read (it restarted empty)
-- Returns {stock or false, the dead-letter stream's length, when the voucher was retired (ms) or
-- false, then order id, user id, admitted at (ms), entry id of every entry still in the stream,
-- in order}. A retired voucher (async_retire.lua) has no stream and no dead letters left in Redis:
-- its dead letters are in the database (async_failed_orders).
-- The stream holds only orders not yet written (written ones are deleted), so it is short. The
-- dead letters are only counted here: a dead letter moves an order out of the stream in one step
-- (async_dead.lua), so the dead letters up to this length are the ones this look does not see as
-- pending. Nothing deletes or trims a dead letter, so the caller reads them afterwards, up to this
-- length, without holding Redis for a stream that may be long.
if KEYS[4] then
  redis.call('HSET', KEYS[4], 'load:' .. ARGV[1], 1)
end
local sale = redis.call('HMGET', KEYS[1], 'stock', 'retired')
local out = {sale[1], redis.call('XLEN', KEYS[3]), sale[2]}
for _, e in ipairs(redis.call('XRANGE', KEYS[2], '-', '+')) do
  local f, v = e[2], {}
  for i = 1, #f, 2 do
    v[f[i]] = f[i + 1]
  end
  out[#out + 1] = v['order'] or ''
  out[#out + 1] = v['user'] or ''
  out[#out + 1] = v['at'] or ''
  out[#out + 1] = e[1]
end
return out
