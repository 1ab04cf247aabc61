-- wrk script of the harness's forward-auth rows: GET / with one of 10,000
-- ids in X-Api-Key, the header the limiter's rule counts requests by.
math.randomseed(os.time())
request = function()
  return wrk.format("GET", "/", {["X-Api-Key"] = "key-" .. math.random(1, 10000)})
end
