-- The fast path: a packed call (M or P) in key format v1 is decided here,
-- as far as its batches are one-key spends or checks of a GCRA bucket
-- (folded, S0 to C2, see main.lua) or of a sliding or fixed window
-- without a box, before the rest of the script makes any of its
-- functions: Redis runs this chunk afresh on every call, and making them
-- all cost more than deciding a few dozen such batches. The service puts
-- those batches first in a packed call (pack.go). The first batch this
-- path does not take, and every one after it, is left to the general
-- path (main.lua) with the replies so far: a batch of another shape, a
-- stored value of another algorithm or not well formed (a TAT must have
-- 16 to 20 digits here), or a now before 1970. Each batch decides exactly
-- as spend1 or wspend and spend (batch.lua, windows.lua) do, and a
-- failing command fails its own batch only (redis.pcall), as main.lua's
-- pcall per batch does.
local fast_replies, fast_r, fast_k, fast_a
if ARGV[HEAD_FORMAT] == '1' and (ARGV[HEAD_OP] == 'M' or ARGV[HEAD_OP] == 'P') then
  local B = 1000000000
  local MAX_HI, MAX_LO = 9223372036, 854775807 -- math.MaxInt64
  local MAXC = 9007199254740991 -- 2^53 - 1, as in prelude.lua
  local inline, margin = ARGV[HEAD_OP] == 'P', tonumber(ARGV[HEAD_MARGIN])
  -- limbs turns a decimal int64 argument into limbs, as num does.
  local function limbs(s)
    local neg, n = string.byte(s, 1) == 45, #s
    if n <= 15 then
      local x = tonumber(s)
      local h = math.floor(x / B)
      local l = x - h * B
      if l < 0 then
        return h - 1, l + B
      elseif l >= B then
        return h + 1, l - B
      end
      return h, l
    end
    local u = neg and string.sub(s, 2) or s
    local h, l = tonumber(string.sub(u, 1, #u - 9)), tonumber(string.sub(u, #u - 8))
    if neg then
      if l == 0 then
        return -h, 0
      end
      return -h - 1, B - l
    end
    return h, l
  end
  -- The value strings of the last window batch (cost, count, period) and
  -- their numbers.
  local s_cost, cost, s_count, count, s_period, W
  -- window decides a one-key window batch, its values (WIN_*) at ARGV[x],
  -- as wspend and spend do, at now (nh, nl). It returns the reply's two
  -- items, or nothing when the general path must decide it.
  local function window(key, write, fixed, mode, nh, nl, x)
    local s = ARGV[x + WIN_COST]
    if s ~= s_cost then
      s_cost, cost = s, tonumber(s)
    end
    s = ARGV[x + WIN_COUNT]
    if s ~= s_count then
      s_count, count = s, tonumber(s)
    end
    s = ARGV[x + WIN_PERIOD]
    if s ~= s_period then
      s_period, W = s, tonumber(s)
    end
    local got = redis.pcall('GET', key)
    if type(got) == 'table' then
      return got, ''
    end
    local p, i, c, q
    if got then
      -- a counter, as counter (windows.lua) reads it
      p, i, c, q = string.match(got, '^(%d+):(%-?%d+):(%d+):(%d+)$')
      if not p or #p > 16 or #i > 17 or #c > 16 or #q > 16 then
        return
      end
      p, i, c, q = tonumber(p), tonumber(i), tonumber(c), tonumber(q)
      if p < 1 or c > MAXC or q > MAXC or math.abs(i * p) > MAXC then
        return
      end
    else
      got = ''
    end
    local nm = nh * 1000 + math.floor(nl / 1000000)
    local xw = math.floor(nm / W)
    local cur, prev = 0, 0
    if p == W then
      if i == xw then
        cur, prev = c, q
      elseif i == xw - 1 then
        prev = c
      end
    end
    if fixed then
      prev = 0
    end
    if cur > count - cost or prev * (W - (nm - xw * W)) > (count - cur - cost) * W then
      if mode ~= 50 then
        return 0, got
      end
      return 1, got
    end
    if not write or mode == 49 or cost == 0 then
      return 1, got
    end
    if p ~= W or i <= xw then
      i, c, q = xw, cur + cost, prev
    elseif i ~= xw + 1 or fixed then
      return 1, got
    else
      q = math.min(q + cost, MAXC)
    end
    -- stored until margin ms after it counts nothing, as wstore does
    local e = i * W
    if c > 0 then
      e = e + 2 * W
    elseif q > 0 then
      e = e + W
    end
    local res
    if e <= nm then
      res = redis.pcall('DEL', key)
    else
      res = redis.pcall('PSETEX', key, string.format('%d', e - nm + margin), string.format('%d:%d:%d:%d', W, i, c, q))
    end
    if type(res) == 'table' and res.err then
      return res, ''
    end
    return 1, got
  end
  -- erl applies an Edge Rate Limiting call of one counter (operation E)
  -- as call does (erl.lua): the counter K[kk + 1] and, with a box action
  -- other than N, the box entry K[kk + 2]; its values (CALL_*) at ARGV[x].
  -- It returns the reply's four items, or nothing when the general path
  -- must apply it (a stored value that is not a rate counter, or not a
  -- box entry's expiry). Everything is read before anything is written.
  -- The counter is an array here: cs[j] the hits of second last - j + 1,
  -- j from 1 to n, 0 for none (rates.lua's c[j - 1]).
  local s_d, d, s_win, win, s_rate, rate -- as window's: the last call's
  local function erl(K, kk, x, nh, nl)
    local y = x + (CALL_SIZE - CTR_SIZE) + CTR_SIZE -- the counter's values
    local s = ARGV[y + CTR_DELTA]
    if s ~= s_d then
      s_d, d = s, tonumber(s)
    end
    s = ARGV[y + CTR_WINDOW]
    if s ~= s_win then
      s_win, win = s, tonumber(s)
    end
    s = ARGV[y + CTR_RATE]
    if s ~= s_rate then
      s_rate, rate = s, tonumber(s)
    end
    y = y + CTR_SIZE -- the box action's
    local act = ARGV[y + ACTION_KIND]
    local key = K[kk + 1]
    local v = redis.pcall('GET', key)
    if type(v) == 'table' then
      return v, '', '', ''
    end
    local last, n, cs = 0, 0, {}
    if v then
      local b, w, m = string.byte(v, 1), string.byte(v, 6), #v - 6
      if not (m > 0 and b ~= 45 and (b < 48 or b > 57) and (w == 1 or w == 2 or w == 4) and m % w == 0 and m <= 60 * w) then
        return -- not a rate counter: rparse reads or refuses it
      end
      n = m / w
      if w == 1 then
        last = struct.unpack('>i5', v)
        cs = { string.byte(v, 7, 6 + n) }
      else
        cs = { struct.unpack('>i5B' .. string.rep(w == 2 and 'H' or 'I4', n), v) }
        last = table.remove(cs, 1)
        table.remove(cs, 1)
        table.remove(cs) -- struct.unpack's next position
      end
    else
      v = ''
    end
    -- radd: d hits at second nh
    if d > 0 then
      if nh <= last - 60 then
        last, n, cs = nh, 0, {}
      elseif nh > last then
        local k = nh - last
        local ns = {}
        for j = 1, math.min(k, 60) do
          ns[j] = 0
        end
        for j = 1, math.min(n, 60 - k) do
          ns[j + k] = cs[j]
        end
        last, n, cs = nh, math.min(n + k, 60), ns
        if k >= 60 then
          n = 0
        end
      end
      local j = last - nh + 1
      cs[j] = math.min((cs[j] or 0) + d, 4294967295) -- ratecounter.MaxHitsPerSecond
      if j > n then
        for i = n + 1, j - 1 do
          cs[i] = 0
        end
        n = j
      end
    end
    -- rwin: the hits of the win seconds up to nh
    local above = false
    if win > 0 then
      local sum, j0 = 0, last - nh
      for j = math.max(j0, 0) + 1, math.min(j0 + win, n) do
        sum = sum + cs[j]
      end
      above = sum > rate * win
    end
    -- the box entry, as bread reads it
    local bv, eh, el, name = '', 0, 0, nil
    if act ~= 'N' then
      name = K[kk + 2]
      local got = redis.pcall('GET', name)
      if type(got) == 'table' then
        return got, '', '', ''
      elseif got then
        if #got < 16 or #got > 20 or not string.find(got, '^%d+$') then
          return
        end
        bv = got
        local h, l = limbs(got)
        if nh < h or (nh == h and nl < l) then
          eh, el = h, l
        end
      end
    end
    local th, tl = eh, el
    if act == 'X' then
      th, tl = 0, 0
    elseif act == 'P' or act == 'E' or (act == 'A' and above) then
      local uh, ul = limbs(ARGV[y + ACTION_UNTIL]) -- read only when it counts
      if act == 'P' or th < uh or (th == uh and tl < ul) then
        th, tl = uh, ul
      end
    end
    local nm = nh * 1000 + math.floor(nl / 1000000)
    local res
    if d > 0 then
      -- rwrite
      if last + 60 <= nh then
        res = redis.pcall('DEL', key)
      else
        local top, most = 1, 0
        for j = n, 1, -1 do
          if cs[j] > 0 then
            top = j
            break
          end
        end
        for j = 1, top do
          most = math.max(most, cs[j] or 0)
        end
        local out
        if most > 65535 then
          out = struct.pack('>i5B' .. string.rep('I4', top), last, 4, unpack(cs, 1, top))
        elseif most > 255 then
          out = struct.pack('>i5B' .. string.rep('H', top), last, 2, unpack(cs, 1, top))
        elseif top == 1 then
          out = struct.pack('>i5BB', last, 1, cs[1] or 0)
        else
          out = struct.pack('>i5B', last, 1) .. string.char(unpack(cs, 1, top))
        end
        res = redis.pcall('PSETEX', key, string.format('%d', (last + 60) * 1000 - nm + margin), out)
      end
      if type(res) == 'table' and res.err then
        return res, '', '', ''
      end
    end
    local after = bv
    if th ~= eh or tl ~= el then
      -- bwrite
      after = ''
      if nh < th or (nh == th and nl < tl) then
        after = string.format('%d%09d', th, tl)
        local dh, dl = th - nh, tl - nl
        if dl < 0 then
          dh, dl = dh - 1, dl + B
        end
        res = redis.pcall('PSETEX', name, string.format('%d', dh * 1000 + math.floor((dl + 999999) / 1000000) + margin), after)
      else
        res = redis.pcall('DEL', name)
      end
      if type(res) == 'table' and res.err then
        return res, '', '', ''
      end
    end
    return 1, v, bv, after
  end
  local replies, r, k, a = {}, 0, 0, HEAD_SIZE + 1
  -- The strings of the last batch's now (seconds), increment and burst
  -- offset, and their values: batches in one call mostly share them, and
  -- comparing two Lua strings costs next to nothing.
  local s_nh, nh, s_inc, ih, il, s_bur, bh, bl
  local last = #ARGV
  while a <= last do
    -- A batch's first argument is its folded token (FTOKEN_TOKEN) or its
    -- operation (PACK_OP); a window batch's op token follows its now.
    local t = ARGV[a + FTOKEN_TOKEN]
    local key, v, win, nkeys
    if #t == 2 then
      key, v = KEYS[k + 1], a + FTOKEN_SIZE
      if inline then
        key, v = ARGV[a + FTOKEN_SIZE], a + (FTOKEN_SIZE + 1)
      end
    elseif t == 'E' then
      local n = ARGV[a + PACK_KEYS]
      key, v = KEYS, a + PACK_SIZE
      if inline then
        key, v = ARGV, a + PACK_SIZE + tonumber(n) -- the call's names, then its now
      end
      if ARGV[v + (NOW_SIZE + CALL_COUNTERS)] ~= '1' then
        break
      end
      nkeys = tonumber(n)
    elseif (t == 'S' or t == 'C') and ARGV[a + PACK_KEYS] == '1' then
      key, v = KEYS[k + 1], a + PACK_SIZE
      if inline then
        key, v = ARGV[a + PACK_SIZE], a + (PACK_SIZE + 1)
      end
      win = ARGV[v + (NOW_SIZE + WIN_TOKEN)]
      local w = string.byte(win, 1)
      if #win ~= 2 or (w ~= 87 and w ~= 70) then -- 'W', 'F'
        break
      end
    else
      break
    end
    local op, mode = string.byte(t, 1), string.byte(win or t, 2) -- 'S' 83 or 'C' 67; '0' 48 to '2' 50 (E: unused)
    local s = ARGV[v + NOW_HI]
    if s ~= s_nh then
      s_nh, nh = s, tonumber(s)
    end
    if nh < 1 then
      break
    end
    local nl = tonumber(ARGV[v + NOW_LO])
    v = v + NOW_SIZE
    local verdict, got
    if t == 'E' then
      local b, after
      verdict, got, b, after = erl(key, inline and a + (PACK_SIZE - 1) or k, v, nh, nl)
      if verdict == nil then
        break
      end
      replies[r + 1], replies[r + 2], replies[r + 3], replies[r + 4] = verdict, got, b, after
      r = r + 4
      v = v + (CALL_SIZE + CTR_SIZE + ACTION_SIZE)
      if inline then
        a = v
      else
        k, a = k + nkeys, v
      end
    elseif win then
      verdict, got = window(key, op == 83, string.byte(win, 1) == 70, mode, nh, nl, v)
      if verdict == nil then
        break
      end
      v = v + WIN_SIZE
    else
      s = ARGV[v + FOLDED_INCREMENT]
      if s ~= s_inc then
        s_inc, ih, il = s, limbs(s)
      end
      s = ARGV[v + FOLDED_BURST]
      if s ~= s_bur then
        s_bur, bh, bl = s, limbs(s)
      end
      v = v + FOLDED_SIZE
      got = redis.pcall('GET', key)
      local th, tl = nh, nl -- t = max(now, tat)
      if type(got) == 'table' then
        verdict, got = got, ''
      elseif got then
        local n = #got
        if n < 16 or n > 20 or string.byte(got, 1) == 45 or not string.find(got, '^%d+$') then
          break
        end
        local l = tonumber(string.sub(got, n - 8))
        local h = math.floor((tonumber(got) - l) / B + 0.5)
        if nh < h or (nh == h and nl < l) then
          th, tl = h, l
        else
          -- full: the same as missing, deleted on the spot
          got = ''
          local e = redis.pcall('DEL', key)
          if type(e) == 'table' and e.err then
            verdict = e
          end
        end
      else
        got = ''
      end
      if not verdict then
        verdict = 1
        -- newTAT = t + increment, saturating at the largest int64.
        local wh, wl = th + ih, tl + il
        if wl >= B then
          wh, wl = wh + 1, wl - B
        end
        if wh > MAX_HI or (wh == MAX_HI and wl > MAX_LO) then
          wh, wl = MAX_HI, MAX_LO
        end
        -- Denied when newTAT > now + burstOffset.
        local lh, ll = nh + bh, nl + bl
        if ll >= B then
          lh, ll = lh + 1, ll - B
        end
        if lh < wh or (lh == wh and ll < wl) then
          if mode ~= 50 then
            verdict = 0
          end
        elseif op == 83 and mode ~= 49 and (th < wh or (th == wh and tl < wl)) then
          -- expiring margin ms after the bucket is full again
          local dh, dl = wh - nh, wl - nl
          if dl < 0 then
            dh, dl = dh - 1, dl + B
          end
          local e = redis.pcall('PSETEX', key, string.format('%d', dh * 1000 + math.floor((dl + 999999) / 1000000) + margin),
            string.format('%d%09d', wh, wl))
          if e.err then -- PSETEX answers a status, {ok = 'OK'}, or an error
            verdict, got = e, ''
          end
        end
      end
    end
    if t ~= 'E' then
      replies[r + 1], replies[r + 2] = verdict, got
      r = r + 2
      if inline then
        a = v
      else
        k, a = k + 1, v
      end
    end
  end
  if a > last then
    return replies
  end
  fast_replies, fast_r, fast_k, fast_a = replies, r, k, a
end
