-- next_id.lua: the parts of the next id (or of a block of ids), from the Redis server's clock and
-- the generator's state.
-- KEYS[1]  the generator's hash {sec, seq}: the second and the sequence of the last id issued
-- ARGV[1]  how many ids to reserve, 1 to 4096 (absent: 1)
-- Returns {sec, seq}: the first id of the block; the caller builds the ids as
-- (sec - epoch) << 32 | (seq + i) for i below the count, each seq + i < 2^32.
--
-- seq is never below the server clock's microsecond within sec << 12, and always above the
-- last seq of the same sec. So the ids follow one clock for every instance, and a hash lost
-- when Redis restarts empty is re-created above every id the lost one issued: those were never
-- ahead of the clock by more than one block (that would take more than 4096 ids within one
-- microsecond: more than one call a microsecond in blocks of 4096, more than one Redis can run).
-- When the clock is behind the stored sec (a failover to a server with a slower clock), the
-- stored sec is kept and seq counts on. When the block would reach 2^32, it moves to the
-- next second rather than fail.
-- Needs Redis 5 or later: TIME before a write is replicated by effects.
local n = tonumber(ARGV[1] or '1')
if not n or n < 1 or n > 4096 or n ~= math.floor(n) then
  return redis.error_reply('next_id: count must be an integer from 1 to 4096')
end
local now = redis.call('TIME')
local sec = tonumber(now[1])
local seq = tonumber(now[2]) * 4096
local last = redis.call('HMGET', KEYS[1], 'sec', 'seq')
if last[1] then
  local lastSec, lastSeq = tonumber(last[1]), tonumber(last[2])
  if lastSec > sec then
    sec, seq = lastSec, lastSeq + 1
  elseif lastSec == sec and lastSeq >= seq then
    seq = lastSeq + 1
  end
end
if seq + n > 4294967296 then
  sec, seq = sec + 1, 0
end
redis.call('HSET', KEYS[1], 'sec', sec, 'seq', seq + n - 1)
return {sec, seq}
