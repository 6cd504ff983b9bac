-- async_group.lua: create the writers' consumer group of a voucher's stream, and the stream if
-- missing, unless the voucher was retired. Both keys carry the voucher's hash tag, so the
-- script runs on Redis Cluster.
-- KEYS[1]  the sale hash   KEYS[2]  the voucher's order stream
-- ARGV[1]  the consumer group
-- Returns 1 when the group exists now (created here, or before), 0 when the sale hash is marked
-- retired (async_retire.lua): the retirement deleted the stream with its group, and nothing is
-- created. A writer whose loop still read the stream then created both again with MKSTREAM, an
-- empty stream and group that nothing deleted again; a retired sale admits nobody, so no order
-- is pending there, and one reopened has lost the mark.
-- The group reads from the stream's start ('0', not '$'): entries admitted before any writer
-- ran are orders too.
if redis.call('HEXISTS', KEYS[1], 'retired') == 1 then
  return 0
end
local res = redis.pcall('XGROUP', 'CREATE', KEYS[2], ARGV[1], '0', 'MKSTREAM')
if type(res) == 'table' and res.err and not string.find(res.err, 'BUSYGROUP', 1, true) then
  return redis.error_reply(res.err)
end
return 1
