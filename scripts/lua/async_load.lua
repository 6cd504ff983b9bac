-- async_load.lua: create a voucher's sale hash, unless it exists, from the database's books.
-- KEYS[1]  the sale hash {stock, begin, end}   KEYS[2]  the users hash   KEYS[3]  the orders hash
-- ARGV[1]  units left: the database's stock minus the orders the loader counted as pending
-- ARGV[2]  begin, ARGV[3] end of the sale window, ms since the Unix epoch
-- ARGV[4..] pairs of order id, user id: the orders the loader counted as pending
-- Returns 1 when it created the hash, 0 when the hash was there (another loader won; its books
-- are as good as these, and orders may have been admitted against them since).
-- The caller restores the users hash before this runs: until the sale hash exists, async_admit
-- admits nobody, so a half-restored users hash is never read.
-- An order counted as pending may have been dead-lettered since the loader read the stream:
-- async_dead.lua, finding no sale hash, gave its unit back to nobody, and the loader may have
-- restored its user after async_dead.lua released it. Such an order's status is failed; its
-- unit goes back here and its user is released again, in the same step that creates the hash,
-- so no dead letter can fall between the check and the stock it corrects.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
local stock = tonumber(ARGV[1])
for i = 4, #ARGV, 2 do
  local status = redis.call('HGET', KEYS[3], ARGV[i])
  if status and string.sub(status, 1, 7) == 'failed|' then
    stock = stock + 1
    if redis.call('HGET', KEYS[2], ARGV[i + 1]) == ARGV[i] then
      redis.call('HDEL', KEYS[2], ARGV[i + 1])
    end
  end
end
redis.call('HSET', KEYS[1], 'stock', stock, 'begin', ARGV[2], 'end', ARGV[3])
return 1
