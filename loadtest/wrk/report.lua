-- report.lua: the done() of the wrk scripts of scripts/scaling.sh (and capacity.sh): one line
--   wrk-json {"requests":N,"seconds":S,"non2xx":N,"errors":N,"p50ms":X,"p99ms":Y}
-- after wrk's own text, so that the scripts read the figures without parsing units.
-- "errors" counts connect, read, write and timeout errors; non2xx the answers that were not
-- 2xx or 3xx. Latencies are wrk's: from a request's send to its answer, over all answers.
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'wrk-json {"requests":%d,"seconds":%.3f,"non2xx":%d,"errors":%d,"p50ms":%.3f,"p99ms":%.3f}\n',
    summary.requests, summary.duration / 1e6, e.status, e.connect + e.read + e.write + e.timeout,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000))
end
