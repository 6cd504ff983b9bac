-- async_admit.lua: admit orders of one seckill voucher in the asynchronous mode, atomically:
-- one order, or the orders of one voucher that arrived at an instance together (a batch: the
-- script's own cost and the sale hash's reads and stock update are paid once per call, not
-- once per order). Each order is decided as if it ran alone, in the order given.
-- Every key is passed in KEYS and all of them carry the voucher's hash tag {voucher:ID}, so the
-- script runs unchanged on Redis Cluster; no key is built here.
-- KEYS[1]  the sale hash {stock, begin, end}: units left, the window in ms since the Unix epoch
-- KEYS[2]  the users hash: user id -> order id of every user holding an order of the voucher
-- KEYS[3]  the orders hash: order id -> "pending|user|at" while the order is not in the database
-- KEYS[4]  the voucher's order stream, read by the writers' consumer group
-- ARGV[1]  voucher id
-- ARGV[2], ARGV[3], ARGV[4]  the first order's user id, order id and deadline: from that moment
-- on (Redis's clock, ms since the Unix epoch) it is no longer admitted ('' for no deadline);
-- ARGV[5], ARGV[6], ARGV[7] the second's; ...
-- Returns {code, order id} per order, flat, in ARGV's order, then Redis's time of the call (ms,
-- the caller's reading of Redis's clock): {0, its id} admitted; {2, ''} outside the sale
-- window; {3, id} the user already holds order id (an earlier order of this call's included);
-- {4, ''} sold out; {5, ''} the orders hash already holds the order id: void (this call ran
-- after the caller gave up on its answer and settled the admission as not admitted,
-- async_settle.lua), or admitted by an earlier run of the same call (which the caller settles
-- as admitted); {6, ''} past its deadline: the call ran after its caller may have answered
-- that nothing was admitted (a call waits in Redis's socket while Redis hangs, and runs when it
-- resumes), so it admits nothing. When the sale hash is missing it returns {1} alone: nothing
-- was decided (load the voucher from the database and try again).
-- Ids stay strings: order ids exceed 2^53, past what a Lua number holds exactly.
-- The window is read on Redis's clock (TIME), not on the calling instance's: every instance
-- then opens and closes the sale at the same instant, however far their clocks are apart (a
-- deadline on a client's clock is the pitfall of the SETNX-timestamp lock; the order ids come
-- from Redis's clock for the same reason). The same instant is each admitted order's 'at'.
-- The duplicate check comes before the stock is touched, so a repeated request never takes a
-- unit. The orders are decided first (reads only: one HMGET per hash for the whole call), then
-- the stock is taken for all of them in one HINCRBY, then they are recorded (one HSET per hash)
-- and appended: a write that failed half way would leave units taken and not sold (what
-- reconcile reports), never an order admitted without its unit.
local sale = redis.call('HMGET', KEYS[1], 'stock', 'begin', 'end')
if not sale[1] then
  return {1}
end
local time = redis.call('TIME')
local at = time[1] .. string.format('%03d', math.floor(tonumber(time[2]) / 1000))
local now = tonumber(at)
local open = now >= tonumber(sale[2]) and now < tonumber(sale[3])
local left = tonumber(sale[1])
local n = math.floor((#ARGV - 1) / 3)
if n == 0 then
  return {}
end
local users, ids, late = {}, {}, {}
for i = 1, n do
  users[i], ids[i] = ARGV[3 * i - 1], ARGV[3 * i]
  local deadline = ARGV[3 * i + 1]
  late[i] = deadline ~= '' and now >= tonumber(deadline)
end
-- One HMGET per hash for the whole call, not an HEXISTS and an HGET per order: each redis.call
-- has a cost of its own (docs/loadtest.md, "The admission script's reads and writes").
local known = redis.call('HMGET', KEYS[3], unpack(ids))
local held = open and redis.call('HMGET', KEYS[2], unpack(users)) or {}
local out = {}
local mine = {} -- user id -> order id admitted by this call
local taken = 0
for i = 1, n do
  local user, id = users[i], ids[i]
  local code, answer = 0, ''
  if known[i] then
    code = 5
  elseif late[i] then
    code = 6
  elseif not open then
    code = 2
  else
    local earlier = mine[user] or held[i]
    if earlier then
      code, answer = 3, earlier
    elseif left <= 0 then
      code = 4
    else
      left, taken = left - 1, taken + 1
      mine[user] = id
      answer = id
    end
  end
  out[2 * i - 1] = code
  out[2 * i] = answer
end
out[2 * n + 1] = at
if taken == 0 then
  return out
end
redis.call('HINCRBY', KEYS[1], 'stock', -taken)
local userPairs, orderPairs = {}, {}
for i = 1, n do
  if out[2 * i - 1] == 0 then
    userPairs[#userPairs + 1] = users[i]
    userPairs[#userPairs + 1] = ids[i]
    orderPairs[#orderPairs + 1] = ids[i]
    orderPairs[#orderPairs + 1] = 'pending|' .. users[i] .. '|' .. at
  end
end
redis.call('HSET', KEYS[2], unpack(userPairs))
redis.call('HSET', KEYS[3], unpack(orderPairs))
for i = 1, n do
  if out[2 * i - 1] == 0 then
    redis.call('XADD', KEYS[4], '*', 'order', ids[i], 'user', users[i], 'voucher', ARGV[1], 'at', at)
  end
end
return out
