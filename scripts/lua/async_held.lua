-- async_held.lua: are a batch's entries still in their stream? A writer asks while its
-- transaction holds the voucher's row, just before it commits, so that a batch read before Redis
-- lost the stream (it restarted empty) is not committed after a reload read the database
-- without it: the reload would then have given its units and users back to Redis.
-- KEYS[1]  the voucher's order stream
-- ARGV[1..] the entry ids of the orders the batch writes, in stream order (ascending (ms, seq))
--           for the cheap path below; in any other order the answer is the same, at the cost
--           of a lookup per id
-- Returns how many of them are no longer in the stream (0: commit).
--
-- A lookup per id (XRANGE id id) costs Redis about as much as the admission itself: each seeks
-- its entry in the stream's radix tree and scans the listpack node that holds it. One XRANGE
-- from the first id to the last reads a batch that is nearly contiguous, as one read of new
-- entries is (other consumers' entries interleave), at a fraction of that per entry. It reads at
-- most `spread` entries per id; the ids it did not see (a batch spread wider, as claimed entries
-- of a long backlog are, or entries gone) are then looked up one by one, so that the cost stays
-- a small multiple of the per-id lookups whatever lies between the ids, and the answer is the
-- lookups' for every input: an id counts as held only when an entry of exactly that id was read.
local spread = 2

if #ARGV == 0 then
  return 0
end
local seen = {}
for _, e in ipairs(redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[#ARGV], 'COUNT', spread * #ARGV)) do
  seen[e[1]] = true
end
local gone = 0
for i = 1, #ARGV do
  if not seen[ARGV[i]] and #redis.call('XRANGE', KEYS[1], ARGV[i], ARGV[i]) == 0 then
    gone = gone + 1
  end
end
return gone
