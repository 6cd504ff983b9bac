-- async_unregister.lua: delete the Redis keys of a registered voucher the database does not have
-- (a load answered that it has no such voucher), in one step, only if nothing in them can be
-- needed: the caller then takes the voucher out of the registry. Every key is passed in KEYS and
-- all of them carry the voucher's hash tag, so the script runs on Redis Cluster (the registry,
-- which does not, is left to the caller).
-- KEYS[1]  the sale hash   KEYS[2]  the users hash   KEYS[3]  the orders hash
-- KEYS[4]  the voucher's order stream   KEYS[5]  its dead-letter stream   KEYS[6]  the attempts hash
-- Returns 1 when it deleted them, 0 when the voucher must stay: a sale hash (loaded since), a
-- load's token in the orders hash (a load under way, which registers the voucher; the load that
-- found no voucher deleted its own), an order in the stream (pending), a dead letter, or an
-- order's status (pending or failed) in the orders hash, which a lookup must go on finding.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
if redis.call('HEXISTS', KEYS[3], 'load') == 1 then
  return 0
end
if redis.call('XLEN', KEYS[4]) > 0 or redis.call('XLEN', KEYS[5]) > 0 then
  return 0
end
local statuses = redis.call('HVALS', KEYS[3])
for _, v in ipairs(statuses) do
  if string.sub(v, 1, 8) == 'pending|' or string.sub(v, 1, 7) == 'failed|' then
    return 0
  end
end
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
return 1
