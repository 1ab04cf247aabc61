-- wrk script: POST /v1/spend of one transaction for one of 10,000 ids, on
-- the limit named by LIMITER_BENCH_LIMIT (the harness sets it). With
-- LIMITER_BENCH_DENIED_LIMIT also set, every other request (at random)
-- spends that limit instead, for one of 10,000 ids "over-N" the harness
-- has already spent, so that half the requests are denied.
math.randomseed(os.time())
local limit = os.getenv("LIMITER_BENCH_LIMIT") or "APIRequestsPerKey"
local denied = os.getenv("LIMITER_BENCH_DENIED_LIMIT") or ""
local headers = {["Content-Type"] = "application/json"}
request = function()
  local body
  if denied ~= "" and math.random(1, 2) == 1 then
    body = '{"limit":"' .. denied .. '","id":"over-' .. math.random(1, 10000) .. '","cost":1}'
  else
    body = '{"limit":"' .. limit .. '","id":"key-' .. math.random(1, 10000) .. '","cost":1}'
  end
  return wrk.format("POST", "/v1/spend", headers, body)
end
