  -- leases makes, on a call's first concurrency op, the functions of lease
  -- sets, and returns them (lx): inside ext_make, so that only calls with
  -- such an op pay for making them, and the others one function more.
  --
  -- A concurrency limit's bucket is its lease set, one string: 'L', then
  -- each lease as '<id>:<cost>:<exp>', separated by ',', where id is the
  -- service's lease id (32 lowercase hex), cost the slots it holds and
  -- exp its expiry in unix ms; e.g. 'L0af3…:1:1767225600000'. Its first
  -- byte, 'L', tells it from a TAT, a window counter and a box entry (a
  -- digit or '-') and from a rate counter (a byte below 3 or above 252).
  -- Every number is an integer below 2^53, exact in a double. A set holds
  -- at most count (10,000) leases, and an empty one is deleted. A lease
  -- is live while now_ms < exp; expired ones are dropped whenever the set
  -- is read, and the key (a v2 hash) expires a margin after the latest
  -- lease.
  --
  -- A concurrency op's reply item is its lease id, '=', and the set as
  -- read ('' for none): the service decides again from it with the
  -- concurrency functions, and an idempotency record, which keeps the
  -- reply items, keeps the lease id an acquire was given with it.
  local lx
  local function leases()
    if lx then
      return lx
    end

    -- lwrite stores the n leases (ids, cs, es), whose latest expiry is
    -- top, expiring margin milliseconds after it; no lease deletes the
    -- key.
    local function lwrite(key, ids, cs, es, n, top)
      if n == 0 then
        drop(key)
        return
      end
      local parts = {}
      for i = 1, n do
        parts[i] = string.format('%s:%d:%d', ids[i], cs[i], es[i])
      end
      local ms = string.format('%d', top - nowms() + margin)
      local v = 'L' .. table.concat(parts, ',')
      if GROUPED then
        put(key, ms, v)
      else
        redis.call('PSETEX', key, ms, v)
      end
    end

    -- lread returns the value v of key as read ('' for none) and its live
    -- leases at now: ids, costs and expiries, their number, the slots
    -- they hold and their latest expiry. Another algorithm's value (the
    -- limit's algorithm changed) reads as no lease; anything else is
    -- refused. Expired leases are dropped from Redis on the spot, which
    -- changes no decision.
    local function lread(key)
      local v = get(key) or ''
      local ids, cs, es, n, used, top = {}, {}, {}, 0, 0, 0
      if v == '' then
        return v, ids, cs, es, 0, 0, 0
      end
      if string.byte(v, 1) ~= 76 or not string.find(v, '^L[%x:,]*$') then
        if counter(v) or israte(v) or (#v <= 20 and string.find(v, '^%-?%d+$')) then
          return v, ids, cs, es, 0, 0, 0
        end
        error('limiter: ' .. key .. ' does not hold a lease set')
      end
      local nm, gone = nowms(), false
      for id, c, e in string.gmatch(v, '(%x+):(%d+):(%d+)') do
        e = tonumber(e)
        if nm < e then
          c = tonumber(c)
          n = n + 1
          ids[n], cs[n], es[n] = id, c, e
          used = used + c
          if e > top then
            top = e
          end
        else
          gone = true
        end
      end
      if gone then
        lwrite(key, ids, cs, es, n, top)
      end
      return v, ids, cs, es, n, used, top
    end

    -- lspend decides an acquire, whose token is mode and whose values
    -- (LEASE_*) are at ARGV[b], as concurrency.Acquire does: allowed when
    -- the live leases' slots and its cost fit in its count. It returns
    -- the reply item, whether the op denies the batch, and, when the
    -- batch is allowed and the op writes (not check-only, cost above 0),
    -- a function that writes the set with the new lease added.
    local function lspend(key, b, mode)
      local cost, limit = count(ARGV[b + LEASE_COST]), count(ARGV[b + LEASE_COUNT])
      local id = ARGV[b + LEASE_ID]
      local v, ids, cs, es, n, used, top = lread(key)
      local item = id .. '=' .. v
      local m = string.byte(mode, 2) -- '0' 48, '1' 49, '2' 50
      if used + cost > limit then
        return item, m ~= 50
      end
      if m == 49 or cost == 0 then
        return item, false
      end
      local e = nowms() + count(ARGV[b + LEASE_TTL])
      return item, false, function()
        n = n + 1
        ids[n], cs[n], es[n] = id, cost, e
        lwrite(key, ids, cs, es, n, math.max(top, e))
      end
    end

    -- lrefund releases ('LR' in t) or renews ('LN') the live lease its
    -- values (RLEASE_*) at ARGV[b] name, as concurrency.Release and Renew
    -- do. It returns the reply item and, when the lease was live, a
    -- function that writes the set changed.
    local function lrefund(key, b, t)
      local id = ARGV[b + RLEASE_ID]
      local v, ids, cs, es, n, _, top = lread(key)
      local item = id .. '=' .. v
      for i = 1, n do
        if ids[i] == id then
          if t == 'LN' then
            es[i] = nowms() + count(ARGV[b + RLEASE_TTL])
            top = math.max(top, es[i])
          else
            table.remove(ids, i)
            table.remove(cs, i)
            table.remove(es, i)
            n = n - 1
            top = 0
            for j = 1, n do
              top = math.max(top, es[j])
            end
          end
          return item, function()
            lwrite(key, ids, cs, es, n, top)
          end
        end
      end
      return item
    end

    -- lstale reports whether the lease set v holds no live lease: for the
    -- sweep of a v2 hash, and for a reset (bucket.Busy is its opposite).
    -- A value that is not a lease set (written by someone else) is not
    -- stale: a sweep leaves it alone.
    local function lstale(v)
      if not string.find(v, '^L[%x:,]*$') then
        return false
      end
      local nm = nowms()
      for e in string.gmatch(v, ':%d+:(%d+)') do
        if nm < tonumber(e) then
          return false
        end
      end
      return true
    end

    lx = { spend = lspend, refund = lrefund, stale = lstale }
    return lx
  end

