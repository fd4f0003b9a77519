-- Shared by post.lua and sse.lua (bench/compare's wrk scripts).
--
-- Arguments after wrk's `--`:
--   --body FILE          request body (POST); default: no body, GET
--   --header "K: V"      extra request header (repeatable)
--   --close              send Connection: close (a new connection, and with
--                        https a full TLS handshake, per request)
--   --min-events N       sse.lua: a response with fewer `data:` events counts
--                        as short
-- done() prints one line, `WRK_JSON {...}`, that bench/compare parses:
-- requests, duration, errors, latency percentiles in microseconds (p99.9
-- included, which wrk's --latency does not print) and, for sse.lua, the
-- `data:` events counted in every response body.

local M = {}

M.min_events = 0

function M.configure(args)
  local i = 1
  while i <= #args do
    local a = args[i]
    if a == "--body" then
      local f = assert(io.open(args[i + 1], "rb"))
      wrk.body = f:read("*a")
      f:close()
      wrk.method = "POST"
      wrk.headers["Content-Type"] = "application/json"
      i = i + 2
    elseif a == "--header" then
      local k, v = string.match(args[i + 1], "^([^:]+):%s*(.*)$")
      wrk.headers[k] = v
      i = i + 2
    elseif a == "--close" then
      wrk.headers["Connection"] = "close"
      i = i + 1
    elseif a == "--min-events" then
      M.min_events = tonumber(args[i + 1])
      i = i + 2
    else
      error("unknown argument " .. a)
    end
  end
end

local threads = {}

function M.setup(thread)
  table.insert(threads, thread)
end

function M.done(summary, latency, requests)
  local events, short = 0, 0
  for _, t in ipairs(threads) do
    events = events + (t:get("events") or 0)
    short = short + (t:get("short") or 0)
  end
  local e = summary.errors
  io.write(string.format(
    'WRK_JSON {"duration_us":%d,"requests":%d,"bytes":%d,"connect_errors":%d,' ..
    '"read_errors":%d,"write_errors":%d,"status_errors":%d,"timeouts":%d,' ..
    '"lat_mean_us":%.1f,"lat_max_us":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,' ..
    '"p999_us":%d,"events":%d,"short":%d}\n',
    summary.duration, summary.requests, summary.bytes, e.connect, e.read, e.write,
    e.status, e.timeout, latency.mean, latency.max, latency:percentile(50),
    latency:percentile(90), latency:percentile(99), latency:percentile(99.9),
    events, short))
end

return M
