-- async_load.lua: create a voucher's sale hash, unless it exists, from the database's books.
-- KEYS[1]  the sale hash {stock, begin, end}   KEYS[2]  the users hash   KEYS[3]  the orders hash
-- KEYS[4]  the voucher's order stream
-- ARGV[1]  units left: the database's stock minus the orders the loader counted as pending
-- ARGV[2]  begin, ARGV[3] end of the sale window, ms since the Unix epoch
-- ARGV[4]  the load's token: the orders hash's field 'load' as async_books.lua found or set it
--          when the loader read the stream
-- ARGV[5..] quadruples of order id, user id, stream entry id, pending status
-- ("pending|user|at"): the orders the loader counted as pending
-- Returns 1 when it created the hash, 0 when the hash was there (another loader won; its books
-- are as good as these, and orders may have been admitted against them since), -1 when the
-- field 'load' no longer holds the token: either Redis lost the voucher's keys since the loader
-- read the stream (it restarted empty), and with them the orders counted as pending, which no
-- writer will write: created from these books, the hash would hold their units back for ever
-- and map their users to orders that do not exist; or another load created the sale hash since
-- (this step deletes the field when it creates), which was deleted again since (by hand, to
-- change the stock, or lost): orders admitted against it are in neither the stream nor the
-- database as these books read them, and their units would be sold again. Nothing is created;
-- the next load reads what Redis holds now.
-- The field is shared by the loads that read the books since the last creation, so a load that
-- fails leaves it, for the next: it is deleted by the creation, and with the orders hash (a
-- retirement, a Redis that restarted empty).
-- The caller restores the users of the database's rows before this runs: until the sale hash
-- exists, async_admit admits nobody, so a half-restored users hash is never read. The users of
-- the orders counted as pending are restored here, in the step that creates the hash, and only
-- then: a loader that finds the hash created by another restores none, as one of its orders may
-- have been dead-lettered since it read the stream (after that creation, so async_dead.lua
-- released its user): restored, the user would map to a failed order for the rest of the sale,
-- refused already_ordered with it.
-- An order counted as pending may have been dead-lettered since the loader read the stream:
-- async_dead.lua, finding no sale hash, gave its unit back to nobody. Such an order's status is
-- failed; its unit goes back here and its user is not restored (and released, should the users
-- hash still map it to the order), in the same step that creates the hash, so no dead letter
-- can fall between the check and the stock it corrects. The unit goes back whatever the
-- refusal, a stock-short one too: ARGV[1] is the database's stock less this order, and the
-- order is no longer pending.
-- An order counted as pending whose status is missing (the orders hash was lost with the sale
-- hash) gets its pending status back here, and only while its entry is still in the stream: a
-- writer may have written and acknowledged it since the loader read the database (the
-- acknowledgement deletes the entry and the status), and a status restored then would never be
-- deleted again: the order, a row, would read pending forever.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
if redis.call('HGET', KEYS[3], 'load') ~= ARGV[4] then
  return -1
end
redis.call('HDEL', KEYS[3], 'load')
local stock = tonumber(ARGV[1])
for i = 5, #ARGV, 4 do
  local status = redis.call('HGET', KEYS[3], ARGV[i])
  if status and string.sub(status, 1, 7) == 'failed|' then
    stock = stock + 1
    if redis.call('HGET', KEYS[2], ARGV[i + 1]) == ARGV[i] then
      redis.call('HDEL', KEYS[2], ARGV[i + 1])
    end
  else
    redis.call('HSET', KEYS[2], ARGV[i + 1], ARGV[i])
    if not status and #redis.call('XRANGE', KEYS[4], ARGV[i + 2], ARGV[i + 2]) == 1 then
      redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 3])
    end
  end
end
redis.call('HSET', KEYS[1], 'stock', stock, 'begin', ARGV[2], 'end', ARGV[3])
return 1
