-- wrk script: POST /v1/spend for ids never sent before, to fill the memory
-- source with buckets that stay: cost 300 of NewOrdersPerAccount (300 per
-- 3 h in config/defaults.yaml) keeps each bucket for three hours. Thread t
-- sends ids t*10^8+1, t*10^8+2, ...
local headers = {["Content-Type"] = "application/json"}
local threads = 0
setup = function(thread)
  threads = threads + 1
  thread:set("base", threads * 100000000)
end
local n = 0
request = function()
  n = n + 1
  local body = '{"limit":"NewOrdersPerAccount","id":"' .. (base + n) .. '","cost":300}'
  return wrk.format("POST", "/v1/spend", headers, body)
end
