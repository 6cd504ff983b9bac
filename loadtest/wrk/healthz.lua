-- wrk script of scripts/scaling.sh: GET /healthz in a closed loop, the machine's limit for a
-- request through nginx and an instance that touches no store.
wrk.method = "GET"
wrk.path = "/healthz"
dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "report.lua")
