-- SSE streams for bench/compare: like post.lua, and every response body's
-- `data:` events are counted (per thread, summed in done()). A response with
-- fewer than --min-events events is counted as short.
local dir = string.match(debug.getinfo(1, "S").source, "^@(.*/)") or "./"
local common = dofile(dir .. "common.lua")

events = 0
short = 0
local min_events = 0

function init(args)
  common.configure(args)
  min_events = common.min_events
end

function setup(thread)
  common.setup(thread)
end

local find = string.find

function response(status, headers, body)
  local n, pos = 0, 1
  while true do
    local s = find(body, "data:", pos, true)
    if not s then break end
    n = n + 1
    pos = s + 5
  end
  events = events + n
  if n < min_events or status ~= 200 then
    short = short + 1
  end
end

function done(summary, latency, requests)
  common.done(summary, latency, requests)
end
