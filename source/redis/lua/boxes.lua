  -- bread reads a box entry: its value ('' when none) and its expiry as
  -- limbs, (0, 0) when the entry is missing or its expiry is not after
  -- now (the id is out of the box; Redis deletes the entry a margin
  -- later).
  local function bread(name)
    local v = get(name)
    if not v then
      return '', 0, 0
    end
    if #v > 20 or not string.find(v, '^%-?%d+$') then
      error('limiter: ' .. name .. ' does not hold a box entry')
    end
    local h, l = split(v)
    if lt(now_hi, now_lo, h, l) then
      return v, h, l
    end
    return v, 0, 0
  end

  -- bwrite stores a box entry's expiry (h, l), expiring margin
  -- milliseconds after it, or deletes the entry when that is not after
  -- now.
  local function bwrite(name, h, l)
    if lt(now_hi, now_lo, h, l) then
      store(name, h, l, nil, true)
    else
      drop(name)
    end
  end

  -- settle writes what an op with a box writes whatever its batch's fate
  -- (see boxed): hits added to its counter, its box entry.
  local function settle(p)
    if p.ctr then
      radd(p.c, now_hi, p.add)
      rwrite(p.ctr, p.c)
    end
    if p.box then
      bwrite(p.box, p.h, p.l)
    end
  end

  -- gdecide decides a GCRA op of a limit with a box (its values, GCRA_*,
  -- at ARGV[b]) as spend does, without writing. It
  -- returns the value read, whether its bucket denies the cost, and, when
  -- it does not, the new TAT when one is to be written.
  local function gdecide(key, b)
    local ih, il = num(ARGV[b + GCRA_INCREMENT])
    local bh, bl = num(ARGV[b + GCRA_BURST])
    local v, th, tl = read(key)
    if not v then
      v, th, tl = '', now_hi, now_lo
    end
    local wh, wl = add(th, tl, ih, il)
    local lh, ll = add(now_hi, now_lo, bh, bl)
    if lt(lh, ll, wh, wl) or lt(MAX_HI, MAX_LO, wh, wl) then
      return v, true
    end
    if ARGV[b + GCRA_MODE] ~= '1' and lt(th, tl, wh, wl) then
      return v, false, wh, wl
    end
    return v, false
  end

  -- boxed decides, in a spend or check, an op with a penalty box, whose
  -- values at ARGV[b] are 'BOX', its box entry's name, the expiry an id it
  -- boxes gets (BoxUntil), and then its own: a GCRA op's mode, increment
  -- and burst offset; a window op's token, cost, count and period; a rate
  -- counter's token ('R0' to 'R2'), cost, window (s) and rate. It decides
  -- exactly as bucket.SpendBatch does:
  --   - a rate counter's hits over its window, its cost included, going
  --     above rate * window box the id until the later of its expiry and
  --     BoxUntil; it denies when the id is in the box afterwards. Its hits
  --     and its box entry are written (unless check-only) whatever the
  --     batch's fate.
  --   - a GCRA or window op whose id is in the box is denied, its bucket
  --     read and left alone; otherwise its bucket decides, and a denial
  --     in a mode that decides boxes the id (never shortening), which is
  --     written in check-and-spend mode whatever the batch's fate.
  -- It returns the reply's item (the box entry's value, a space, the
  -- bucket's), whether the op denies the batch, what to write whatever
  -- the batch's fate (nil, or a table for settle), and what to write when
  -- the batch is allowed: 'G' and a TAT's limbs, or 'W' and a window
  -- counter (period, index, cur, prev).
  local function boxed(key, b)
    local name = ARGV[b + BOX_NAME]
    local uh, ul = num(ARGV[b + BOX_UNTIL])
    local o = b + BOX_SIZE -- the op's own values
    local mode = ARGV[o] -- its token
    local m = string.byte(mode, #mode) -- '0' 48, '1' 49, '2' 50
    local bv, eh, el = bread(name)
    if string.byte(mode, 1) == 82 then -- 'R': a rate counter
      local cost, W, rate = count(ARGV[o + RATE_COST]), count(ARGV[o + RATE_WINDOW]), count(ARGV[o + RATE_RATE])
      local v = get(key) or ''
      local c = rparse(key, v)
      local nh, nl = eh, el
      if rwin(c, now_hi, W) + cost > rate * W and lt(nh, nl, uh, ul) then
        nh, nl = uh, ul
      end
      local p
      if m ~= 49 then
        if cost > 0 then
          p = { ctr = key, c = c, add = cost }
        end
        if nh ~= eh or nl ~= el then
          p = p or {}
          p.box, p.h, p.l = name, nh, nl
        end
      end
      return bv .. ' ' .. v, m ~= 50 and lt(now_hi, now_lo, nh, nl), p
    end
    local gcra = #mode == 1
    if lt(now_hi, now_lo, eh, el) then
      -- In the box: denied, the bucket read for its own reset only.
      local v
      if gcra then
        v = read(key) or ''
      else
        v = wread(key)
      end
      return bv .. ' ' .. v, m ~= 50
    end
    local v, denied, kind, x1, x2, x3, x4
    if gcra then
      v, denied, x1, x2 = gdecide(key, o)
      denied = denied and m ~= 50
      if x1 then
        kind = 'G'
      end
    else
      v, denied, x1, x2, x3, x4 = wspend(key, o, mode)
      if x1 then
        kind = 'W'
      end
    end
    if denied then
      local p
      if m == 48 then
        p = { box = name, h = uh, l = ul }
        if lt(uh, ul, eh, el) then
          p.h, p.l = eh, el
        end
      end
      return bv .. ' ' .. v, true, p
    end
    return bv .. ' ' .. v, false, nil, kind, x1, x2, x3, x4
  end

  -- rrefund gives back to a rate counter, whose values (RRATE_*) are at ARGV[b]:
  -- up to that many come off the second of now, never below 0
  -- (ratecounter.Counter.Remove). It returns the value read and, when
  -- something was taken, the counter to store (rwrite).
  local function rrefund(key, b)
    local v = get(key) or ''
    local c = rparse(key, v)
    if rremove(c, now_hi, count(ARGV[b + RRATE_HITS])) > 0 then
      return v, c
    end
    return v
  end

