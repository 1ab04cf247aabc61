  -- busy reports whether the value v of a window op's key still counts
  -- something at now (bucket.Busy), spec being 'W', 'F' or 'K' and the
  -- op's period argument (see frame): hits in the current window or, for
  -- a sliding window, in the one before.
  local function busy(key, v, spec)
    if spec == 'L' then
      -- A lease set with a live lease; another algorithm's value is none.
      return string.byte(v, 1) == 76 and not leases().stale(v)
    elseif spec == 'T' then
      -- Not ratecounter.Counter.Empty: a hit in the last minute, and a
      -- clock not a minute or more behind the counter's last second.
      local c = rparse(key, v)
      local t = rnewest(c)
      return t ~= nil and t + SECONDS > now_hi and now_hi > c.last - SECONDS
    end
    local W, x, fixed = frame(string.byte(spec, 1), tonumber(string.sub(spec, 2)))
    local cur, prev = wcounts(W, x, wsplit(key, v))
    return cur > 0 or (prev > 0 and not fixed)
  end

  -- stale reports whether a v2 hash's value v is a window counter, a
  -- rate counter or a lease set that counts nothing at now (a rate
  -- counter from SECONDS after its last second, as rwrite lets it
  -- expire), for the sweep.
  local function stale(v)
    if string.byte(v, 1) == 76 then -- 'L'
      return leases().stale(v)
    end
    local p, i, c, q = counter(v)
    if p ~= nil then
      return ends(p, i, c, q) <= nowms()
    end
    if israte(v) then
      local ok, r = pcall(rparse, 'a field', v)
      return ok and r.last + SECONDS <= now_hi
    end
    return false
  end

  -- sync adds hits to the window counters K[k+1..k+n], whose values
  -- start at ARGV[a], SYNC_SIZE each: the period W, the index x of a window,
  -- its hits and the hits of window x - 1. The counter is rolled forward
  -- to the latest of its own window, x and the window of now; hits of a
  -- window older than the one before that are dropped (they no longer
  -- count), and a count never exceeds 2^53 - 1. With no hits to add it
  -- only reads. The reply holds each counter as stored after the add (''
  -- for none, or one of another period).
  local function sync(K, k, n, a)
    local out = { 1 }
    local nm = nowms()
    for i = 1, n do
      local key = K[k + i]
      local b = a + SYNC_SIZE * (i - 1)
      local W, x, h, ph = count(ARGV[b + SYNC_PERIOD]), count(ARGV[b + SYNC_INDEX]), count(ARGV[b + SYNC_HITS]), count(ARGV[b + SYNC_PREV])
      local v, p, wi, c, q = wread(key)
      if p ~= W then
        v, p = '', nil
      end
      if h > 0 or ph > 0 then
        local top = math.max(x, math.floor(nm / W))
        if p and wi > top then
          top = wi
        end
        local cur, prev = wcounts(W, top, p, wi, c, q)
        if x == top then
          cur, prev = cur + h, prev + ph
        elseif x == top - 1 then
          prev = prev + h
        end
        cur, prev = math.min(cur, MAXC), math.min(prev, MAXC)
        if cur > 0 or prev > 0 then
          v = wstore(key, W, top, cur, prev)
        else
          v = ''
        end
      end
      out[i + 1] = v
    end
    return out
  end

  -- span returns how many values a batch of operation op and n keys
  -- takes, its values starting at ARGV[a]: what a packed call skips when
  -- the batch fails. Every op's first argument tells its kind, and a
  -- window op and a rate counter take as many (WIN_SIZE).
  local function span(op, a, n)
    local b = a
    if op == 'S' or op == 'C' then
      for _ = 1, n do
        if ARGV[b] == 'BOX' then
          b = b + BOX_SIZE
        end
        if #ARGV[b] == 1 then
          b = b + GCRA_SIZE
        elseif string.byte(ARGV[b], 1) == 76 then -- 'L'
          b = b + LEASE_SIZE
        else
          b = b + WIN_SIZE
        end
      end
    elseif op == 'R' then
      for _ = 1, n do
        if ARGV[b] == 'BOX' then
          b = b + RBOX_SIZE
        end
        local t = ARGV[b]
        if t == 'W' or t == 'F' or t == 'K' then
          b = b + RWIN_SIZE
        elseif t == 'T' then
          b = b + RRATE_SIZE
        elseif t == 'LR' or t == 'LN' then
          b = b + RLEASE_SIZE
        else
          b = b + RGCRA_SIZE
        end
      end
    elseif op == 'D' then
      for _ = 1, n do
        if ARGV[b] == 'BOX' then
          b = b + RBOX_SIZE
        end
        b = b + RESET_SIZE
      end
    elseif op == 'A' then
      b = b + SYNC_SIZE * n
    elseif op == 'Y' then
      b = b + PUSH_SIZE * n
    elseif op == 'E' then
      b = b + (CALL_SIZE + ACTION_SIZE) + CTR_SIZE * count(ARGV[b + CALL_COUNTERS])
    end
    return b - a
  end

  ext = {
    counter = counter, spend = wspend, store = wstore, refund = wrefund,
    busy = busy, stale = stale, sync = sync, span = span,
    boxed = boxed, settle = settle, bread = bread, rrefund = rrefund, rwrite = rwrite,
    call = call, rsync = rsync, israte = israte, leases = leases,
  }
  return ext
end

