-- wrk script: POST /v1/erl/check_rate of one hit for one of 10,000 client
-- addresses, on the rate counter (and its box) named by LIMITER_BENCH_LIMIT
-- (the harness sets it), 100 per second over 10 s, 1 minute in the box.
math.randomseed(os.time())
local counter = os.getenv("LIMITER_BENCH_LIMIT") or "BenchRequestsPerIP"
local headers = {["Content-Type"] = "application/json"}
request = function()
  local n = math.random(0, 9999)
  local body = '{"entry":"198.18.' .. math.floor(n / 256) .. '.' .. (n % 256) ..
    '","ratecounter":"' .. counter .. '","delta":1,"window":10,"limit":100,"penaltybox":"' ..
    counter .. '","ttl":"1m"}'
  return wrk.format("POST", "/v1/erl/check_rate", headers, body)
end
