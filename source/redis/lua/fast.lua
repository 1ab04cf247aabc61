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
    local key, v, win
    if #t == 2 then
      key, v = KEYS[k + 1], a + FTOKEN_SIZE
      if inline then
        key, v = ARGV[a + FTOKEN_SIZE], a + (FTOKEN_SIZE + 1)
      end
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
    local op, mode = string.byte(t, 1), string.byte(win or t, 2) -- 'S' 83 or 'C' 67; '0' 48 to '2' 50
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
    if win then
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
    replies[r + 1], replies[r + 2] = verdict, got
    r = r + 2
    if inline then
      a = v
    else
      k, a = k + 1, v
    end
  end
  if a > last then
    return replies
  end
  fast_replies, fast_r, fast_k, fast_a = replies, r, k, a
end
