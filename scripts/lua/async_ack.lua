-- async_ack.lua: after the database committed a batch of orders, acknowledge and delete their
-- stream entries and forget them as pending, in one step.
-- KEYS[1]  the voucher's order stream   KEYS[2]  the orders hash   KEYS[3]  the attempts hash
-- ARGV[1]  the consumer group; then ARGV[2..] pairs of entry id, order id
-- Returns the number of entries acknowledged (0 for those another consumer acknowledged first).
-- Deleting acknowledged entries keeps the stream bounded by the orders not yet written: XTRIM
-- MAXLEN would also drop entries not yet written, and with them orders.
-- Each command takes up to `chunk` ids at once rather than one: a batch costs four commands per
-- chunk instead of four per order, and unpack stays far below Lua's limit on its results.
local chunk = 500
local acked = 0
local i = 2
while i <= #ARGV do
  local ids, orders = {}, {}
  while i <= #ARGV and #ids < chunk do
    ids[#ids + 1] = ARGV[i]
    orders[#orders + 1] = ARGV[i + 1]
    i = i + 2
  end
  acked = acked + redis.call('XACK', KEYS[1], ARGV[1], unpack(ids))
  redis.call('XDEL', KEYS[1], unpack(ids))
  redis.call('HDEL', KEYS[2], unpack(orders))
  redis.call('HDEL', KEYS[3], unpack(ids))
end
return acked
