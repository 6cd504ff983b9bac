-- wrk script of scripts/capacity.sh and scaling.sh: a closed loop of order requests, every request a new user.
--
--   VOUCHER_ID  the voucher to order (created by capacity.sh with more stock than can sell)
--   USER_BASE   first user id (default 3000000000); thread i counts up from USER_BASE + i*1e9
--
-- wrk's threads run separate Lua states: setup() numbers them so that their users never meet.
local voucher = os.getenv("VOUCHER_ID") or error("VOUCHER_ID is not set")
local userBase = tonumber(os.getenv("USER_BASE") or "3000000000")
local path = "/api/vouchers/" .. voucher .. "/orders"

local threads = 0
function setup(thread)
  thread:set("tid", threads)
  threads = threads + 1
end

local next
function init()
  next = userBase + tid * 1000000000
end

function request()
  next = next + 1
  return wrk.format("POST", path, { ["X-User-ID"] = string.format("%d", next), ["Content-Length"] = "0" })
end

dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "report.lua")
