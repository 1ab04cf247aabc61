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
  local step = math.max(1, math.floor(margin / 2)) -- as in main.lua
  -- limbs turns a decimal int64 argument into limbs, as num does.
  local function limbs(s)
    local neg, n = string.byte(s, 1) == 45, #s
    if n <= 15 then
      local x = s + 0
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
    local h, l = string.sub(u, 1, #u - 9) + 0, string.sub(u, #u - 8) + 0
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
      s_cost, cost = s, s + 0
    end
    s = ARGV[x + WIN_COUNT]
    if s ~= s_count then
      s_count, count = s, s + 0
    end
    s = ARGV[x + WIN_PERIOD]
    if s ~= s_period then
      s_period, W = s, s + 0
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
      p, i, c, q = p + 0, i + 0, c + 0, q + 0
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
    -- when the stored counter stops counting (as e below), if of this period
    local was = p == W and i * W + (c > 0 and 2 * W or q > 0 and W or 0)
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
    elseif e == was then
      -- the same end as before: the key keeps the expiry set for it
      res = redis.pcall('SET', key, string.format('%d:%d:%d:%d', W, i, c, q), 'KEEPTTL')
    else
      res = redis.pcall('PSETEX', key, string.format('%d', e - nm + margin), string.format('%d:%d:%d:%d', W, i, c, q))
    end
    if type(res) == 'table' and res.err then
      return res, ''
    end
    return 1, got
  end
  -- erl and rspend decide rate counters with their box entries; rmake
  -- makes them, and the functions they share, on a call's first such
  -- batch: making functions is what a call of GCRA spends should not pay.
  local erl, rspend
  local function rmake()
    -- Rate counters and box entries (rates.lua, boxes.lua). A counter is an
    -- array here: cs[j] the hits of second last - j + 1, j from 1 to n
    -- (rates.lua's c[j - 1]), every one of them set, 0 for none.

    -- rread reads the rate counter at key as rparse does: its value (''
    -- for none), last, n and cs; GET's error; or nothing when the general
    -- path must read it (another algorithm's value, or not a counter).
    local function rread(key)
      local v = redis.pcall('GET', key)
      if type(v) == 'table' then
        return v
      elseif not v then
        return '', 0, 0, {}
      end
      local b, w, m = string.byte(v, 1), string.byte(v, 6), #v - 6
      if not (m > 0 and b ~= 45 and (b < 48 or b > 57) and (w == 1 or w == 2 or w == 4) and m % w == 0 and m <= 60 * w) then
        return
      end
      local n = m / w
      if w == 1 then
        return v, struct.unpack('>i5', v), n, { string.byte(v, 7, 6 + n) }
      end
      local cs = { struct.unpack('>i5B' .. string.rep(w == 2 and 'H' or 'I4', n), v) }
      local last = table.remove(cs, 1)
      table.remove(cs, 1)
      table.remove(cs) -- struct.unpack's next position
      return v, last, n, cs
    end

    -- radd adds d hits at second s, as radd and rshift do.
    local function radd(last, n, cs, s, d)
      if d <= 0 then
        return last, n, cs
      end
      if s <= last - 60 then
        last, n, cs = s, 0, {}
      elseif s > last then
        local k = s - last
        local ns = {}
        for j = 1, math.min(k, 60) do
          ns[j] = 0
        end
        for j = 1, math.min(n, 60 - k) do
          ns[j + k] = cs[j]
        end
        last, n, cs = s, math.min(n + k, 60), ns
        if k >= 60 then
          n = 0
        end
      end
      local j = last - s + 1
      cs[j] = math.min((cs[j] or 0) + d, 4294967295) -- ratecounter.MaxHitsPerSecond
      for i = n + 1, j - 1 do
        cs[i] = 0
      end
      return last, math.max(n, j), cs
    end

    -- rsum is the hits of the W seconds up to s, as rwin.
    local function rsum(last, n, cs, s, W)
      local sum, j0 = 0, last - s
      for j = math.max(j0, 0) + 1, math.min(j0 + W, n) do
        sum = sum + cs[j]
      end
      return sum
    end

    -- deadline is store.lua's, by % rather than a call of math.ceil:
    -- x - x % step + step rounds x + 1 up to a step. The hot writes below
    -- (rstore's, a GCRA spend's) have it written out.
    local function deadline(ms)
      ms = ms + margin - 1
      return ms - ms % step + step
    end

    -- rstore writes the counter as rwrite does, at now_ms nm, and returns
    -- the command's answer; was: the stored counter's last second, if any,
    -- whose key lives to its deadline.
    local function rstore(key, last, n, cs, nh, nm, was)
      if last + 60 <= nh then
        return redis.pcall('DEL', key)
      end
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
      -- deadline written out: x + 1 the new one unrounded, o + 1 the old
      local x = (last + 60) * 1000 + margin - 1
      if was then
        local o = (was + 60) * 1000 + margin - 1
        if x < o - o % step + step then
          return redis.pcall('SET', key, out, 'KEEPTTL')
        end
      end
      return redis.pcall('PSETEX', key, string.format('%d', x - x % step + step - nm), out)
    end

    -- bread reads a box entry as bread (boxes.lua) does: its value ('' for
    -- none) and its expiry when the id is in the box at now (0, 0 when
    -- not); GET's error; or nothing when the general path must read it.
    local function bread(name, nh, nl)
      local got = redis.pcall('GET', name)
      if type(got) == 'table' then
        return got
      elseif not got then
        return '', 0, 0
      end
      if #got < 16 or #got > 20 or not string.find(got, '^%d+$') then
        return
      end
      local h, l = limbs(got)
      if nh < h or (nh == h and nl < l) then
        return got, h, l
      end
      return got, 0, 0
    end

    -- bstore writes a box entry's expiry (th, tl), or deletes the entry when
    -- that is not after now, as bwrite does; it returns the entry as left
    -- ('' for none) and the command's answer.
    local function bstore(name, th, tl, nh, nl)
      if not (nh < th or (nh == th and nl < tl)) then
        return '', redis.pcall('DEL', name)
      end
      local v = string.format('%d%09d', th, tl)
      local d = deadline(th * 1000 + math.ceil(tl / 1000000))
      return v, redis.pcall('PSETEX', name, string.format('%d', d - nh * 1000 - math.floor(nl / 1000000)), v)
    end

    local function failed(res)
      return type(res) == 'table' and res.err
    end

    -- The value strings of the last rate batch or call (cost or delta,
    -- window, rate) and their numbers, as window's.
    local s_d, d, s_win, win, s_rate, rate
    local function rvalues(y, cost, window, rt)
      local s = ARGV[y + cost]
      if s ~= s_d then
        s_d, d = s, s + 0
      end
      s = ARGV[y + window]
      if s ~= s_win then
        s_win, win = s, s + 0
      end
      s = ARGV[y + rt]
      if s ~= s_rate then
        s_rate, rate = s, s + 0
      end
    end

    -- erl applies an Edge Rate Limiting call of one counter (operation E)
    -- as call does (erl.lua): the counter K[kk + 1] and, with a box action
    -- other than N, the box entry K[kk + 2]; its values (CALL_*) at ARGV[x].
    -- It returns the reply's four items, or nothing when the general path
    -- must apply it. Everything is read before anything is written.
    erl = function(K, kk, x, nh, nl)
      local y = x + CALL_SIZE -- the counter's values
      rvalues(y, CTR_DELTA, CTR_WINDOW, CTR_RATE)
      y = y + CTR_SIZE -- the box action's
      local act = ARGV[y + ACTION_KIND]
      local key = K[kk + 1]
      local v, last, n, cs = rread(key)
      if v == nil then
        return
      elseif type(v) == 'table' then
        return v, '', '', ''
      end
      local was = v ~= '' and last or nil
      last, n, cs = radd(last, n, cs, nh, d)
      local above = win > 0 and rsum(last, n, cs, nh, win) > rate * win
      local bv, eh, el, name = '', 0, 0, nil
      if act ~= 'N' then
        name = K[kk + 2]
        bv, eh, el = bread(name, nh, nl)
        if bv == nil then
          return
        elseif type(bv) == 'table' then
          return bv, '', '', ''
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
      local res
      if d > 0 then
        res = rstore(key, last, n, cs, nh, nh * 1000 + math.floor(nl / 1000000), was)
        if failed(res) then
          return res, '', '', ''
        end
      end
      local after = bv
      if th ~= eh or tl ~= el then
        after, res = bstore(name, th, tl, nh, nl)
        if failed(res) then
          return res, '', '', ''
        end
      end
      return 1, v, bv, after
    end

    -- rspend decides a one-key spend or check of a rate counter with its
    -- box ('BOX', the entry's name and BoxUntil, then the op's RATE_*
    -- values at ARGV[x]) as boxed and settle do (boxes.lua): its hits over
    -- its window, its cost included, going above rate * window box the id
    -- until the later of its expiry and BoxUntil, and it denies (but in
    -- spend-only mode) while the id is in the box. Unless check-only, its
    -- hits and box entry are written whatever its verdict. It returns the
    -- reply's two items, or nothing when the general path must decide it.
    rspend = function(key, x, nh, nl)
      local name = ARGV[x + BOX_NAME]
      local o = x + BOX_SIZE -- the op's own values
      local mode = string.byte(ARGV[o + RATE_TOKEN], 2) -- '0' 48, '1' 49, '2' 50
      rvalues(o, RATE_COST, RATE_WINDOW, RATE_RATE)
      local bv, eh, el = bread(name, nh, nl)
      if bv == nil then
        return
      elseif type(bv) == 'table' then
        return bv, ''
      end
      local v, last, n, cs = rread(key)
      if v == nil then
        return
      elseif type(v) == 'table' then
        return v, ''
      end
      local th, tl = eh, el
      if rsum(last, n, cs, nh, win) + d > rate * win then
        local uh, ul = limbs(ARGV[x + BOX_UNTIL])
        if th < uh or (th == uh and tl < ul) then
          th, tl = uh, ul
        end
      end
      if mode ~= 49 then
        local res
        if d > 0 then
          local was = v ~= '' and last or nil
          last, n, cs = radd(last, n, cs, nh, d)
          res = rstore(key, last, n, cs, nh, nh * 1000 + math.floor(nl / 1000000), was)
          if failed(res) then
            return res, ''
          end
        end
        if th ~= eh or tl ~= el then
          local _
          _, res = bstore(name, th, tl, nh, nl)
          if failed(res) then
            return res, ''
          end
        end
      end
      if mode ~= 50 and (nh < th or (nh == th and nl < tl)) then
        return 0, bv .. ' ' .. v
      end
      return 1, bv .. ' ' .. v
    end
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
      if win == 'BOX' then
        local rt = ARGV[v + (NOW_SIZE + BOX_SIZE + RATE_TOKEN)]
        if #rt ~= 2 or string.byte(rt, 1) ~= 82 then -- 'R'
          break
        end
      elseif #win ~= 2 or (w ~= 87 and w ~= 70) then -- 'W', 'F'
        break
      end
    else
      break
    end
    local op, mode = string.byte(t, 1), string.byte(win or t, 2) -- 'S' 83 or 'C' 67; '0' 48 to '2' 50 (E: unused)
    local s = ARGV[v + NOW_HI]
    if s ~= s_nh then
      s_nh, nh = s, s + 0
    end
    if nh < 1 then
      break
    end
    local nl = ARGV[v + NOW_LO] + 0
    v = v + NOW_SIZE
    local verdict, got
    if t == 'E' then
      local b, after
      if not erl then
        rmake()
      end
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
    elseif win == 'BOX' then
      if not rspend then
        rmake()
      end
      verdict, got = rspend(key, v, nh, nl)
      if verdict == nil then
        break
      end
      v = v + (BOX_SIZE + RATE_SIZE)
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
      -- oh, ol: the stored TAT, whose deadline (store.lua) is its key's
      -- expiry; full: that TAT is not after now
      local oh, ol, full
      if type(got) == 'table' then
        verdict, got = got, ''
      elseif got then
        local n = #got
        if n < 16 or n > 20 or string.byte(got, 1) == 45 or not string.find(got, '^%d+$') then
          break
        end
        ol = string.sub(got, n - 8) + 0
        oh = math.floor((got - ol) / B + 0.5)
        if nh < oh or (nh == oh and nl < ol) then
          th, tl = oh, ol
        else
          -- full: the same as missing, and deleted below unless written
          got, full = '', true
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
        local e
        if lh < wh or (lh == wh and ll < wl) then
          if mode ~= 50 then
            verdict = 0
          end
        elseif op == 83 and mode ~= 49 and (th < wh or (th == wh and tl < wl)) then
          -- expiring at the TAT's deadline, deadline (in rmake) written
          -- out: a key that lives on to it, full or not, keeps its expiry.
          -- w: the new deadline unrounded; o + 1: the stored TAT's, from
          -- its whole seconds (a bound below).
          local w = wl + 999999
          w = wh * 1000 + (w - w % 1000000) / 1000000 + margin
          local o = oh and oh * 1000 + margin - 1
          if o and w <= o - o % step + step then
            e = redis.pcall('SET', key, string.format('%d%09d', wh, wl), 'KEEPTTL')
          else
            w = w - 1
            e = redis.pcall('PSETEX', key, string.format('%d', w - w % step + step - nh * 1000 - (nl - nl % 1000000) / 1000000),
              string.format('%d%09d', wh, wl))
          end
          full = false
        end
        if full then
          e = redis.pcall('DEL', key)
        end
        -- SET and PSETEX answer a status ({ok = 'OK'}), DEL a number
        if type(e) == 'table' and e.err then
          verdict, got = e, ''
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
