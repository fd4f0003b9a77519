-- Non-streaming requests for bench/compare: a fixed request (see common.lua
-- for the arguments), no per-response Lua, so wrk stays on its fast path.
local dir = string.match(debug.getinfo(1, "S").source, "^@(.*/)") or "./"
local common = dofile(dir .. "common.lua")

function init(args)
  common.configure(args)
end

function setup(thread)
  common.setup(thread)
end

function done(summary, latency, requests)
  common.done(summary, latency, requests)
end
