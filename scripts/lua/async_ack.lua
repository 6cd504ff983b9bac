-- async_ack.lua: after the database committed a batch of orders, acknowledge and delete their
-- stream entries and forget them as pending, in one step.
-- KEYS[1]  the voucher's order stream   KEYS[2]  the orders hash   KEYS[3]  the attempts hash
-- ARGV[1]  the consumer group; then ARGV[2..] pairs of entry id, order id
-- Returns the number of entries acknowledged (0 for those another consumer acknowledged first).
-- Deleting acknowledged entries keeps the stream bounded by the orders not yet written: XTRIM
-- MAXLEN would also drop entries not yet written, and with them orders.
local acked = 0
for i = 2, #ARGV, 2 do
  acked = acked + redis.call('XACK', KEYS[1], ARGV[1], ARGV[i])
  redis.call('XDEL', KEYS[1], ARGV[i])
  redis.call('HDEL', KEYS[2], ARGV[i + 1])
  redis.call('HDEL', KEYS[3], ARGV[i])
end
return acked
