-- async_load.lua: create a voucher's sale hash, unless it exists, from the database's books.
-- KEYS[1]  the sale hash {stock, begin, end}
-- ARGV[1]  units left: the database's stock minus the orders still pending in the stream
-- ARGV[2]  begin, ARGV[3] end of the sale window, ms since the Unix epoch
-- Returns 1 when it created the hash, 0 when the hash was there (another loader won; its books
-- are as good as these, and orders may have been admitted against them since).
-- The caller restores the users hash before this runs: until the sale hash exists, async_admit
-- admits nobody, so a half-restored users hash is never read.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('HSET', KEYS[1], 'stock', ARGV[1], 'begin', ARGV[2], 'end', ARGV[3])
return 1
