-- spend decides the batch of keys K[k+1..k+n] (K is KEYS or ARGV), whose
-- values start at ARGV[a], and writes its GCRA buckets and window
-- counters when it is allowed and write is set. What an op with a box
-- writes whatever the batch's fate (its hits, its box entry) is written
-- in any case: spend runs for S and for C, the part of a cluster batch
-- that an earlier part denied. It returns the reply and how many values
-- the batch took. Window ops are decided by ext.spend (wspend), ops with
-- a box by ext.boxed, concurrency ops by leases().spend (leases.lua).
local function spend(K, k, n, a, write)
  local out = { 0 }
  local allowed = true
  local nw -- new TATs to write as (hi, lo) pairs at 2i-1, 2i; made when needed
  local ww -- new counters as (period, index, cur, prev) at 4i-3 .. 4i
  local lw -- writers of lease sets, at i
  local pend -- what ops with a box write whatever the batch's fate, in order
  local b = a
  for i = 1, n do
    local key = K[k + i]
    local mode = ARGV[b] -- every op's first argument: its token
    if #mode == 1 then
      local ih, il = num(ARGV[b + GCRA_INCREMENT])
      local bh, bl = num(ARGV[b + GCRA_BURST])
      b = b + GCRA_SIZE
      local v, th, tl = read(key)
      if v then
        out[i + 1] = v
      else
        out[i + 1] = ''
        th, tl = now_hi, now_lo -- t = max(now, tat)
      end
      -- newTAT = t + increment. Allowed when newTAT - burstOffset <= now,
      -- compared exactly (a limb sum has no bound), and newTAT fits in an
      -- int64, as gcra decides.
      local wh, wl = add(th, tl, ih, il)
      local lh, ll = add(now_hi, now_lo, bh, bl)
      if lt(lh, ll, wh, wl) or lt(MAX_HI, MAX_LO, wh, wl) then
        if mode ~= '2' then
          allowed = false
        end
      elseif mode ~= '1' and lt(th, tl, wh, wl) then
        nw = nw or {}
        nw[2 * i - 1], nw[2 * i] = wh, wl
      end
    else
      local e = ext or ext_make()
      local v, denies, W, x, c, q
      if mode == 'BOX' then
        local p, kind
        v, denies, p, kind, W, x, c, q = e.boxed(key, b)
        if p then
          pend = pend or {}
          pend[#pend + 1] = p
        end
        if kind == 'G' then
          nw = nw or {}
          nw[2 * i - 1], nw[2 * i] = W, x
          W = nil
        end
        if #ARGV[b + BOX_SIZE] == 1 then
          b = b + (BOX_SIZE + GCRA_SIZE)
        else
          b = b + (BOX_SIZE + WIN_SIZE)
        end
      elseif string.byte(mode, 1) == 76 then -- 'L': a concurrency op
        v, denies, W = e.leases().spend(key, b, mode)
        b = b + LEASE_SIZE
        if W then
          lw = lw or {}
          lw[i], W = W, nil
        end
      else
        v, denies, W, x, c, q = e.spend(key, b, mode)
        b = b + WIN_SIZE
      end
      out[i + 1] = v
      if denies then
        allowed = false
      elseif W then
        local j = 4 * i
        ww = ww or {}
        ww[j - 3], ww[j - 2], ww[j - 1], ww[j] = W, x, c, q
      end
    end
  end
  if allowed then
    out[1] = 1
    if write and (nw or ww or lw) then
      for i = 1, n do
        local h = nw and nw[2 * i - 1]
        if h then
          store(K[k + i], h, nw[2 * i])
        elseif ww and ww[4 * i] then
          local j = 4 * i
          ext.store(K[k + i], ww[j - 3], ww[j - 2], ww[j - 1], ww[j])
        elseif lw and lw[i] then
          lw[i]()
        end
      end
    end
  end
  if pend then
    for i = 1, #pend do
      ext.settle(pend[i])
    end
  end
  return out, b - a
end

-- spend1 is spend for a batch of one key, the common case, with lt and
-- add written out and no table: in Redis's Lua a function call costs about
-- a third of a tonumber, and a growing table as much as two. It decides
-- exactly as spend does with n = 1, from the increment (ih, il) and the
-- burst offset (bh, bl) as limbs, and returns the reply's two items.
local function spend1(key, ih, il, bh, bl, write, mode)
  local v, th, tl = read(key, true)
  -- oh: the stored TAT's seconds, if any; full: it is not after now (its
  -- key, kept by read, is rewritten or deleted below)
  local oh, full = th, not v and th
  if not v then
    v, th, tl = '', now_hi, now_lo -- t = max(now, tat)
  end
  -- newTAT = t + increment. Denied when newTAT > now + burstOffset,
  -- compared exactly, or when newTAT does not fit in an int64.
  local wh, wl = th + ih, tl + il
  if wl >= B then
    wh, wl = wh + 1, wl - B
  end
  local lh, ll = now_hi + bh, now_lo + bl
  if ll >= B then
    lh, ll = lh + 1, ll - B
  end
  if lh < wh or (lh == wh and ll < wl) or wh > MAX_HI or (wh == MAX_HI and wl > MAX_LO) then
    if mode ~= '2' then
      if full then
        drop(key)
      end
      return 0, v
    end
  elseif write and mode ~= '1' and (th < wh or (th == wh and tl < wl)) then
    store(key, wh, wl, oh)
    return 1, v
  end
  if full then
    drop(key)
  end
  return 1, v
end


-- refund gives back to K[k+1..k+n], whose values start at ARGV[a], and
-- returns the reply and how many values it took. Window ops are given
-- back by ext.refund (wrefund), rate counters by ext.rrefund, and
-- concurrency ops release or renew a lease (leases().refund). An op with a
-- box ('BOX' and its entry's name before its values) reads its entry,
-- never writes it, and its reply item is the entry's value, a space, and
-- its bucket's. Every value is read before anything is written, so a
-- batch that fails on a value it cannot read writes nothing.
local function refund(K, k, n, a)
  local out = { 1 }
  local pw -- what to write, per op: {h, l} a TAT (or a deletion), {W, x, c, q} a window, {c} a rate counter
  local b = a
  for i = 1, n do
    local key = K[k + i]
    local t = ARGV[b] -- every op's first argument: its kind
    local bv
    if t == 'BOX' then
      bv = (ext or ext_make()).bread(ARGV[b + RBOX_NAME])
      b = b + RBOX_SIZE
      t = ARGV[b]
    end
    if t == 'W' or t == 'F' or t == 'K' then
      local v, W, x, c, q = (ext or ext_make()).refund(key, b, t)
      out[i + 1] = v
      if W then
        pw = pw or {}
        pw[i] = { W, x, c, q }
      end
      b = b + RWIN_SIZE
    elseif t == 'LR' or t == 'LN' then
      local v, w = (ext or ext_make()).leases().refund(key, b, t)
      out[i + 1] = v
      if w then
        pw = pw or {}
        pw[i] = w
      end
      b = b + RLEASE_SIZE
    elseif t == 'T' then
      local v, c = (ext or ext_make()).rrefund(key, b)
      out[i + 1] = v
      if c then
        pw = pw or {}
        pw[i] = { c }
      end
      b = b + RRATE_SIZE
    else
      local dh, dl = num(t)
      b = b + RGCRA_SIZE
      local v, th, tl = read(key)
      if v then
        out[i + 1] = v
        -- newTAT = max(tat - decrement, now): never more than full.
        local wh, wl = sub(th, tl, dh, dl)
        if lt(wh, wl, now_hi, now_lo) then
          wh, wl = now_hi, now_lo
        end
        if lt(wh, wl, th, tl) then
          pw = pw or {}
          pw[i] = { wh, wl }
        end
      else
        out[i + 1] = ''
      end
    end
    if bv then
      out[i + 1] = bv .. ' ' .. out[i + 1]
    end
  end
  if pw then
    for i = 1, n do
      local w = pw[i]
      if type(w) == 'function' then
        w()
      elseif w and w[4] then
        ext.store(K[k + i], w[1], w[2], w[3], w[4])
      elseif w and w[2] then
        if lt(now_hi, now_lo, w[1], w[2]) then
          store(K[k + i], w[1], w[2])
        else
          drop(K[k + i])
        end
      elseif w then
        ext.rwrite(K[k + i], w[1])
      end
    end
  end
  return out, b - a
end

-- reset deletes K[k+1..k+n] and counts those that still counted
-- something at now (bucket.Busy): a GCRA bucket that was not full, a
-- window counter with hits in the current window, or, for a sliding
-- window, in the previous one, a rate counter with hits in the last
-- minute, or a key whose id was in its box. Their values start at
-- ARGV[a], one each, after 'BOX' and the box entry's name for a key with
-- a box, whose entry is deleted too. Everything is read before anything
-- is deleted. It returns the count and how many values the batch took.
local function reset(K, k, n, a)
  local busy = 0
  local gone, m = {}, 0
  local b = a
  for i = 1, n do
    local key = K[k + i]
    local spec = ARGV[b] -- every op's first argument: its kind
    local counts = false
    if spec == 'BOX' then
      local name = ARGV[b + RBOX_NAME]
      local bv, eh, el = (ext or ext_make()).bread(name)
      counts = lt(now_hi, now_lo, eh, el)
      if bv ~= '' then
        m = m + 1
        gone[m] = name
      end
      b = b + RBOX_SIZE
      spec = ARGV[b]
    end
    b = b + RESET_SIZE
    local v = get(key)
    if v then
      if spec == 'G' then
        local h, l = parse(key, v)
        if h and lt(now_hi, now_lo, h, l) then
          counts = true
        end
      elseif (ext or ext_make()).busy(key, v, spec) then
        counts = true
      end
      m = m + 1
      gone[m] = key
    end
    if counts then
      busy = busy + 1
    end
  end
  for i = 1, m do
    drop(gone[i])
  end
  return busy, b - a
end

-- run decides one batch: operation op on K[k+1..k+n], with "now" at
-- ARGV[a] (NOW_*) and its values after. It returns the batch's reply
-- and how many values the batch took after its now; for a one-key GCRA
-- spend, the reply's two items instead (verdict, then used, then the
-- TAT), which spares a table.
local function run(op, K, k, n, a)
  now_hi, now_lo = count(ARGV[a + NOW_HI]), ARGV[a + NOW_LO] + 0
  if op == 'S' or op == 'C' then
    local g = a + NOW_SIZE
    if n == 1 and #ARGV[g + GCRA_MODE] == 1 then
      local ih, il = num(ARGV[g + GCRA_INCREMENT])
      local bh, bl = num(ARGV[g + GCRA_BURST])
      local verdict, tat = spend1(K[k + 1], ih, il, bh, bl, op == 'S', ARGV[g + GCRA_MODE])
      return verdict, GCRA_SIZE, tat
    end
    return spend(K, k, n, a + NOW_SIZE, op == 'S')
  elseif op == 'R' then
    return refund(K, k, n, a + NOW_SIZE)
  elseif op == 'D' then
    return reset(K, k, n, a + NOW_SIZE)
  elseif op == 'A' then
    return (ext or ext_make()).sync(K, k, n, a + NOW_SIZE), SYNC_SIZE * n
  elseif op == 'E' then
    return (ext or ext_make()).call(K, k, a + NOW_SIZE)
  elseif op == 'Y' then
    return (ext or ext_make()).rsync(K, k, n, a + NOW_SIZE), PUSH_SIZE * n
  end
  error('limiter: unknown operation ' .. tostring(op))
end

