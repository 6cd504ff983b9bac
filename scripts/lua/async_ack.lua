-- async_ack.lua: after the database committed a batch of orders, acknowledge and delete their
-- stream entries and forget them as pending, in one step.
-- KEYS[1]  the voucher's order stream   KEYS[2]  the orders hash   KEYS[3]  the attempts hash
-- ARGV[1]  the consumer group; then ARGV[2..] pairs of entry id, order id
-- Returns the number of entries acknowledged (0 for those another consumer acknowledged first).
-- Deleting acknowledged entries keeps the stream bounded by the orders not yet written: XTRIM
-- MAXLEN would also drop entries not yet written, and with them orders. So the stream holds
-- exactly the entries not yet acknowledged (async_dead.lua deletes the one it dead-letters).
--
-- How they are deleted. XDEL seeks each id on its own and scans the listpack node that holds it
-- from the node's start: about 9 µs of Redis per entry, a quarter of what an order costs Redis
-- (docs/loadtest.md, "The acknowledgement trims"). The entries below the floor (the oldest entry some
-- group still needs: the first it holds pending, else the one after the last it was given)
-- have all been acknowledged, and by the invariant above the only ones still in the stream are
-- this call's: XTRIM MINID floor deletes exactly them, freeing whole nodes and crossing the
-- last one once. That is a batch written while no older entry waits, the common case; the ids
-- at or above the floor (an older batch still being written by another consumer) are deleted
-- by XDEL. When an id cannot be compared as numbers (more digits than a Lua number holds
-- exactly), every id goes to XDEL, as before. That every entry below a group's last-delivered
-- id was delivered holds because the writers create the group at 0 (async_group.lua); a group
-- created or moved past entries by hand (XGROUP CREATE ... $, XGROUP SETID) breaks it.
-- Each command takes up to `chunk` ids at once rather than one: a batch costs four commands per
-- chunk instead of four per order, and unpack stays far below Lua's limit on its results.
local chunk = 500

-- parse returns an entry id's two halves as numbers, nil when either has more digits than a
-- Lua number holds exactly.
local function parse(id)
  local ms, seq = string.match(id, '^(%d+)%-(%d+)$')
  if not ms or #ms > 15 or #seq > 15 then
    return nil
  end
  return tonumber(ms), tonumber(seq)
end

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
  redis.call('HDEL', KEYS[2], unpack(orders))
  redis.call('HDEL', KEYS[3], unpack(ids))
end

-- The floor, once this call's entries are acknowledged: the lowest, over the stream's groups,
-- of the first pending entry, or the entry after the last delivered one when none is pending.
-- Nil when some id cannot be compared, or the stream is gone (nothing left to delete).
local floor_ms, floor_seq
local groups = redis.call('EXISTS', KEYS[1]) == 1 and redis.call('XINFO', 'GROUPS', KEYS[1]) or {}
for _, g in ipairs(groups) do
  local info = {}
  for i = 1, #g - 1, 2 do
    info[g[i]] = g[i + 1]
  end
  local ms, seq
  local first = tonumber(info['pending']) > 0 and redis.call('XPENDING', KEYS[1], info['name'], '-', '+', 1)[1]
  if first then
    ms, seq = parse(first[1])
  else
    ms, seq = parse(info['last-delivered-id'])
    if ms then
      seq = seq + 1
    end
  end
  if not ms then
    floor_ms = nil
    break
  end
  if not floor_ms or ms < floor_ms or (ms == floor_ms and seq < floor_seq) then
    floor_ms, floor_seq = ms, seq
  end
end

-- below reports whether id is below the floor (trimmed by XTRIM MINID).
local function below(id)
  if not floor_ms then
    return false
  end
  local ms, seq = parse(id)
  return ms ~= nil and (ms < floor_ms or (ms == floor_ms and seq < floor_seq))
end

local trim = false
local rest = {}
for j = 2, #ARGV, 2 do
  if below(ARGV[j]) then
    trim = true
  else
    rest[#rest + 1] = ARGV[j]
    if #rest == chunk then
      redis.call('XDEL', KEYS[1], unpack(rest))
      rest = {}
    end
  end
end
if #rest > 0 then
  redis.call('XDEL', KEYS[1], unpack(rest))
end
if trim then
  redis.call('XTRIM', KEYS[1], 'MINID', string.format('%d-%d', floor_ms, floor_seq))
end
return acked
