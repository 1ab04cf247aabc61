-- wrk script: acquire and release pairs of a concurrency limit. A
-- request is a POST /v1/spend of one slot of the limit named by
-- LIMITER_BENCH_LIMIT (the harness sets it) for one of 10,000 ids, or,
-- when this thread holds a lease its answer gave, the POST /v1/release of
-- that lease: every acquire is followed by the release of its lease, so a
-- run's requests are half acquires and half releases, and its pairs per
-- second are half its requests per second.
math.randomseed(os.time())
local limit = os.getenv("LIMITER_BENCH_LIMIT") or "BenchLeases"
local headers = {["Content-Type"] = "application/json"}
local ids, leases, n = {}, {}, 0 -- leases this thread holds, and their ids
request = function()
  if n > 0 then
    local body = '{"limit":"' .. limit .. '","id":"' .. ids[n] .. '","lease":"' .. leases[n] .. '"}'
    ids[n], leases[n], n = nil, nil, n - 1
    return wrk.format("POST", "/v1/release", headers, body)
  end
  local body = '{"limit":"' .. limit .. '","id":"key-' .. math.random(1, 10000) .. '","cost":1}'
  return wrk.format("POST", "/v1/spend", headers, body)
end
response = function(status, hdrs, body)
  local lease = string.match(body, '"lease":"(%x+)"')
  if lease then
    n = n + 1
    ids[n], leases[n] = string.match(body, '"id":"([^"]*)"'), lease
  end
end
