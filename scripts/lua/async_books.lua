-- async_books.lua: one consistent look at a voucher's books in Redis, for reconcile and reload.
-- KEYS[1]  the sale hash   KEYS[2]  the voucher's order stream   KEYS[3]  its dead-letter stream
-- KEYS[4], ARGV[1]  (a loader's, optional) the orders hash and a new token. While the sale hash
--          is missing, the orders hash's field 'load' holds the token of the loads that read the
--          books since the sale hash was last created: set here to ARGV[1] when missing, and
--          deleted by async_load.lua when it creates the sale hash. A load whose token is no
--          longer there when it creates read books that are stale: Redis lost the keys since (it
--          restarted empty), or another load created the sale hash since, against which orders
--          may have been admitted that these books do not count (the hash deleted again since).
-- Returns {stock or false, the dead-letter stream's length, when the voucher was retired (ms) or
-- false, the load's token or false (none asked, or the sale hash exists: nothing to load), then
-- order id, user id, admitted at (ms), entry id of every entry still in the stream, in order}. A retired voucher (async_retire.lua) has no stream and no dead letters left in Redis:
-- its dead letters are in the database (async_failed_orders).
-- The stream holds only orders not yet written (written ones are deleted), so it is short. The
-- dead letters are only counted here: a dead letter moves an order out of the stream in one step
-- (async_dead.lua), so the dead letters up to this length are the ones this look does not see as
-- pending. Nothing deletes or trims a dead letter, so the caller reads them afterwards, up to this
-- length, without holding Redis for a stream that may be long.
local sale = redis.call('HMGET', KEYS[1], 'stock', 'retired')
local token = false
if KEYS[4] and not sale[1] then
  token = redis.call('HGET', KEYS[4], 'load')
  if not token then
    token = ARGV[1]
    redis.call('HSET', KEYS[4], 'load', token)
  end
end
local out = {sale[1], redis.call('XLEN', KEYS[3]), sale[2], token}
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
