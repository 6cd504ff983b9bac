-- async_settle.lua: settle an admission whose script call failed without an answer (a timeout,
-- a broken connection): the script may have run, or may still run later (a call the caller gave
-- up on is not withdrawn: it waits in a pipeline's queue, or in a busy Redis's socket buffer).
-- Admitted by now, the order is answered admitted; otherwise its id is voided, in the same step,
-- so that the admission script, should it run after this, admits nothing (async_admit.lua
-- refuses an order id the orders hash holds), and the caller's "not admitted" stays true.
-- KEYS[1]  the users hash   KEYS[2]  the orders hash
-- ARGV[1]  user id   ARGV[2]  order id (new: the admission's)
-- Returns 1 when the order was admitted (its user maps to it, or it has a status: pending, or
-- failed already), 0 when it was not and never will be: the orders hash then maps its id to
-- 'void' (deleted with the hash when the voucher is retired; no lookup reads it as an order).
-- A 'void' found there is no status but an earlier settling call's mark: that call ran and its
-- answer was lost (the caller settles again at the order's deadline), and the order stays not
-- admitted.
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  return 1
end
local status = redis.call('HGET', KEYS[2], ARGV[2])
if status == 'void' then
  return 0
end
if status then
  return 1
end
redis.call('HSET', KEYS[2], ARGV[2], 'void')
return 0
