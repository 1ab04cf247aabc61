  -- call applies an ERL call (operation E, bucket.ApplyCall): K[k+1..k+m]
  -- are its counters and K[k+m+1] its box entry; ARGV[a] holds m
  -- (CALL_*), then per counter its delta, window (s; 0 checks nothing) and
  -- rate (CTR_*), then (ACTION_*) the box action (N none, R read, A box when a counter went above its
  -- limit, P replace, X remove, E extend) and the expiry it gives. Each
  -- counter gets its delta at the second of now; a box action other than
  -- R and N sets the entry's expiry: A and E to the later of it and the
  -- given one (A only when a counter went above), P to the given one, X
  -- to none. Everything is read before anything is written. The reply is
  -- {1, c_1..c_m, box, box after}: the counters and the box entry as
  -- read, and the box entry as the call left it ('' when none). It
  -- returns the reply and how many values the call took after its now.
  local function call(K, k, a)
    local m = count(ARGV[a + CALL_COUNTERS])
    local c0 = a + (CALL_SIZE - CTR_SIZE) -- counter i's values are at c0 + CTR_SIZE * i
    local out, cs, above = { 1 }, {}, false
    for i = 1, m do
      local b = c0 + CTR_SIZE * i
      local d, W, rate = count(ARGV[b + CTR_DELTA]), count(ARGV[b + CTR_WINDOW]), count(ARGV[b + CTR_RATE])
      local v = get(K[k + i]) or ''
      out[i + 1] = v
      local c = rparse(K[k + i], v)
      radd(c, now_hi, d)
      if W > 0 and rwin(c, now_hi, W) > rate * W then
        above = true
      end
      cs[i] = c
    end
    local x = c0 + CTR_SIZE * (m + 1) -- the box action's values
    local act = ARGV[x + ACTION_KIND]
    local uh, ul = num(ARGV[x + ACTION_UNTIL])
    local name = K[k + m + 1]
    local bv, eh, el = '', 0, 0
    if act ~= 'N' then
      bv, eh, el = bread(name)
    end
    local nh, nl = eh, el
    if act == 'P' then
      nh, nl = uh, ul
    elseif act == 'X' then
      nh, nl = 0, 0
    elseif (act == 'E' or (act == 'A' and above)) and lt(nh, nl, uh, ul) then
      nh, nl = uh, ul
    end
    for i = 1, m do
      if count(ARGV[c0 + CTR_SIZE * i + CTR_DELTA]) > 0 then
        rwrite(K[k + i], cs[i])
      end
    end
    local after = bv
    if nh ~= eh or nl ~= el then
      bwrite(name, nh, nl)
      after = ''
      if lt(now_hi, now_lo, nh, nl) then
        after = format(nh, nl)
      end
    end
    out[m + 2], out[m + 3] = bv, after
    return out, x + ACTION_SIZE - a
  end

  -- rsync adds pushes of other processes (operation Y) to the rate
  -- counters and box entries K[k+1..k+n], whose values start at ARGV[a],
  -- PUSH_SIZE each: the hits ('' to only read, '-' for a push without a
  -- counter, whose key is then its box entry), the box entry's name (''
  -- for none) and the expiry to store ('0' to only read). Hits are added
  -- second by second, oldest first (ratecounter.Counter.Merge); a box
  -- entry becomes the later of its expiry and the pushed one. The reply
  -- is {1, c_1, b_1, ..., c_n, b_n}: each counter and box entry as
  -- stored after the push ('' for none).
  local function rsync(K, k, n, a)
    local out = { 1 }
    for i = 1, n do
      local b = a + PUSH_SIZE * (i - 1)
      local hits, name = ARGV[b + PUSH_HITS], ARGV[b + PUSH_BOX]
      local key = K[k + i]
      local cv, after = '', ''
      local c, eh, el
      if hits ~= '-' then
        cv = get(key) or ''
        c = rparse(key, cv)
      end
      if name ~= '' then
        after, eh, el = bread(name)
      end
      if c and hits ~= '' then
        rmerge(c, rparse('a push to ' .. key, hits))
        cv = rwrite(key, c)
      end
      if name ~= '' then
        local ph, pl = num(ARGV[b + PUSH_EXPIRY])
        if lt(eh, el, ph, pl) and lt(now_hi, now_lo, ph, pl) then
          store(name, ph, pl, nil, true)
          after = format(ph, pl)
        end
      end
      out[2 * i], out[2 * i + 1] = cv, after
    end
    return out
  end

