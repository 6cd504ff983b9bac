-- async_attempt.lua: count one refused attempt of an entry, only while the entry is pending for
-- this consumer, in one step. A writer whose entry another consumer claimed meanwhile (it idled
-- past the claim idle: the writer stalled, or its command was slow to reach Redis) must not add
-- its refusal to the new owner's count, nor leave a count behind an entry already acknowledged
-- or dead-lettered (whose count was deleted): async_dead.lua checks ownership the same way.
-- KEYS[1]  the voucher's order stream   KEYS[2]  the attempts hash
-- ARGV[1]  group   ARGV[2]  consumer   ARGV[3]  entry id
-- Returns the entry's count of refused attempts, this one included, or 0 when the entry is no
-- longer this consumer's: then nothing is counted.
local owner = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1)
if #owner == 0 or owner[1][2] ~= ARGV[2] then
  return 0
end
return redis.call('HINCRBY', KEYS[2], ARGV[3], 1)
