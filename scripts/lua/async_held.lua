-- async_held.lua: are a batch's entries still in their stream? A writer asks while its
-- transaction holds the voucher's row, just before it commits, so that a batch read before Redis
-- lost the stream (it restarted empty) is not committed after a reload read the database
-- without it: the reload would then have given its units and users back to Redis.
-- KEYS[1]  the voucher's order stream
-- ARGV[1..] the entry ids of the orders the batch writes
-- Returns how many of them are no longer in the stream (0: commit).
local gone = 0
for i = 1, #ARGV do
  if #redis.call('XRANGE', KEYS[1], ARGV[i], ARGV[i]) == 0 then
    gone = gone + 1
  end
end
return gone
