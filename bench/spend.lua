-- wrk script: POST /v1/spend of one transaction for one of 10,000 ids.
math.randomseed(os.time())
local headers = {["Content-Type"] = "application/json"}
request = function()
  local body = '{"limit":"APIRequestsPerKey","id":"key-' .. math.random(1, 10000) .. '","cost":1}'
  return wrk.format("POST", "/v1/spend", headers, body)
end
