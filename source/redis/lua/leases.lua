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

    -- NO_LEASE is the latest expiry of no lease: below every expiry,
    -- those before 1970 (negative unix ms) included, and exact in a
    -- double.
    local NO_LEASE = -9007199254740992

    -- lwrite stores the lease set s ('' for none), whose latest expiry
    -- is top, expiring margin milliseconds after it; no lease deletes
    -- the key.
    local function lwrite(key, s, top)
      if s == '' then
        drop(key)
        return
      end
      local ms = string.format('%d', top - nowms() + margin)
      if GROUPED then
        put(key, ms, s)
      else
        redis.call('PSETEX', key, ms, s)
      end
    end

    -- lscan returns the slots the leases of set s live at now hold,
    -- their latest expiry, and whether any lease of s has expired. It
    -- reads costs and expiries only: a decision walks every lease.
    local function lscan(s, nm)
      local used, top, gone = 0, NO_LEASE, false
      for c, e in string.gmatch(s, ':(%d+):(%-?%d+)') do
        e = tonumber(e)
        if nm < e then
          used = used + tonumber(c)
          if e > top then
            top = e
          end
        else
          gone = true
        end
      end
      return used, top, gone
    end

    -- lread returns the value v of key as read ('' for none), the set of
    -- its leases live at now ('' for none), the slots they hold and
    -- their latest expiry. Another algorithm's value (the limit's
    -- algorithm changed) reads as no lease; anything else is refused.
    -- Expired leases are dropped from Redis on the spot, which changes no
    -- decision. Only the first lease's form is checked: a pattern over
    -- the whole set would cost as much as the decision itself.
    local function lread(key)
      local v = get(key) or ''
      if v == '' then
        return v, '', 0, NO_LEASE
      end
      if string.byte(v, 1) ~= 76 or not string.find(v, '^L%x+:%d+:%-?%d+') then
        if counter(v) or israte(v) or istat(v) or (#v <= 20 and string.find(v, '^%-?%d+$')) then
          return v, '', 0, NO_LEASE
        end
        error('limiter: ' .. key .. ' does not hold a lease set')
      end
      local nm = nowms()
      local used, top, gone = lscan(v, nm)
      if not gone then
        return v, v, used, top
      end
      local live, n = {}, 0
      for l, e in string.gmatch(v, '(%x+:%d+:(%-?%d+))') do
        if nm < tonumber(e) then
          n = n + 1
          live[n] = l
        end
      end
      local s = ''
      if n > 0 then
        s = 'L' .. table.concat(live, ',')
      end
      lwrite(key, s, top)
      return v, s, used, top
    end

    -- lspend decides an acquire, whose token is mode and whose values
    -- (LEASE_*) are at ARGV[b], as concurrency.Acquire does: allowed when
    -- the live leases' slots and its cost fit in its count. It returns
    -- the reply item, whether the op denies the batch, and, when the
    -- batch is allowed and the op writes (not check-only, cost above 0),
    -- a function that writes the set with the new lease added at its end.
    local function lspend(key, b, mode)
      local cost, limit = count(ARGV[b + LEASE_COST]), count(ARGV[b + LEASE_COUNT])
      local id = ARGV[b + LEASE_ID]
      local v, s, used, top = lread(key)
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
        local l = string.format('%s:%d:%d', id, cost, e)
        if s == '' then
          s = 'L' .. l
        else
          s = s .. ',' .. l
        end
        lwrite(key, s, math.max(top, e))
      end
    end

    -- lrefund releases ('LR' in t) or renews ('LN') the live lease its
    -- values (RLEASE_*) at ARGV[b] name, as concurrency.Release and Renew
    -- do. It returns the reply item and, when the lease was live, a
    -- function that writes the set changed. A lease id is 32 hex digits
    -- and every lease starts after 'L' or ',', so '<id>:' found there is
    -- that lease, and only it.
    local function lrefund(key, b, t)
      local id = ARGV[b + RLEASE_ID]
      local v, s = lread(key)
      local item = id .. '=' .. v
      local at = string.find(s, id .. ':', 1, true)
      local p = at and string.byte(s, at - 1)
      if id == '' or not at or (p ~= 76 and p ~= 44) then -- 'L', ','
        return item
      end
      local stop = (string.find(s, ',', at, true) or #s + 1) - 1
      local head, tail = string.sub(s, 1, at - 1), string.sub(s, stop + 1)
      if t == 'LN' then
        local c = string.match(string.sub(s, at, stop), ':(%d+):')
        local e = nowms() + count(ARGV[b + RLEASE_TTL])
        s = head .. id .. ':' .. c .. ':' .. string.format('%d', e) .. tail
      else
        -- Cut the lease and one comma beside it.
        if tail ~= '' then
          s = head .. string.sub(tail, 2)
        elseif #head > 1 then
          s = string.sub(head, 1, -2)
        else
          s = ''
        end
      end
      local _, top = lscan(s, nowms())
      return item, function()
        lwrite(key, s, top)
      end
    end

    -- lstale reports whether the lease set v holds no live lease: for the
    -- sweep of a v2 hash, and for a reset (bucket.Busy is its opposite).
    -- A value that is not a lease set (written by someone else) is not
    -- stale: a sweep leaves it alone.
    local function lstale(v)
      if not string.find(v, '^L%x+:%d+:%-?%d+') then
        return false
      end
      local nm = nowms()
      for e in string.gmatch(v, ':%d+:(%-?%d+)') do
        if nm < tonumber(e) then
          return false
        end
      end
      return true
    end

    lx = { spend = lspend, refund = lrefund, stale = lstale }
    return lx
  end

