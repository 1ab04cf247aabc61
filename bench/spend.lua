-- wrk script: POST /v1/spend of one transaction for one of 10,000 ids, on
-- the limit named by LIMITER_BENCH_LIMIT (the harness sets it).
math.randomseed(os.time())
local limit = os.getenv("LIMITER_BENCH_LIMIT") or "APIRequestsPerKey"
local headers = {["Content-Type"] = "application/json"}
request = function()
  local body = '{"limit":"' .. limit .. '","id":"key-' .. math.random(1, 10000) .. '","cost":1}'
  return wrk.format("POST", "/v1/spend", headers, body)
end
