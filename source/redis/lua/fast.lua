-- The fast path: a packed call (M or P) in key format v1 is decided here,
-- as far as its batches are folded one-key GCRA spends or checks (S0 to
-- C2, see main.lua), before the rest of the script makes any of its
-- functions: Redis runs this chunk afresh on every call, and making them
-- all cost more than deciding a few dozen such batches. The service puts
-- those batches first in a packed call (pack.go). The first batch this
-- path does not take, and every one after it, is left to the general
-- path (main.lua) with the replies so far: a batch of another shape, a
-- stored value that is not a TAT of 16 to 20 digits, or a now before
-- 1970. Each batch decides exactly as spend1 (batch.lua) does, and a
-- failing command fails its own batch only (redis.pcall), as main.lua's
-- pcall per batch does.
local fast_replies, fast_r, fast_k, fast_a
if ARGV[HEAD_FORMAT] == '1' and (ARGV[HEAD_OP] == 'M' or ARGV[HEAD_OP] == 'P') then
  local B = 1000000000
  local MAX_HI, MAX_LO = 9223372036, 854775807 -- math.MaxInt64
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
  local replies, r, k, a = {}, 0, 0, HEAD_SIZE + 1
  -- The strings of the last batch's now (seconds), increment and burst
  -- offset, and their values: batches in one call mostly share them, and
  -- comparing two Lua strings costs next to nothing.
  local s_nh, nh, s_inc, ih, il, s_bur, bh, bl
  local last = #ARGV
  while a <= last do
    local t = ARGV[a + FTOKEN_TOKEN]
    if #t ~= 2 then
      break
    end
    local op, mode = string.byte(t, 1, 2) -- 'S' 83 or 'C' 67; '0' 48 to '2' 50
    local key, v = KEYS[k + 1], a + FTOKEN_SIZE
    if inline then
      key, v = ARGV[a + FTOKEN_SIZE], a + (FTOKEN_SIZE + 1)
    end
    local s = ARGV[v + NOW_HI]
    if s ~= s_nh then
      s_nh, nh = s, tonumber(s)
    end
    if nh < 1 then
      break
    end
    local nl = tonumber(ARGV[v + NOW_LO])
    v = v + NOW_SIZE
    s = ARGV[v + FOLDED_INCREMENT]
    if s ~= s_inc then
      s_inc, ih, il = s, limbs(s)
    end
    s = ARGV[v + FOLDED_BURST]
    if s ~= s_bur then
      s_bur, bh, bl = s, limbs(s)
    end
    local got, fail = redis.pcall('GET', key), nil
    local th, tl = nh, nl -- t = max(now, tat)
    if type(got) == 'table' then
      fail = got
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
          fail = e
        end
      end
    else
      got = ''
    end
    local verdict = 1
    if not fail then
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
          fail = e
        end
      end
    end
    replies[r + 1], replies[r + 2] = fail or verdict, got
    if fail then
      replies[r + 2] = ''
    end
    r = r + 2
    if inline then
      a = v + FOLDED_SIZE
    else
      k, a = k + 1, v + FOLDED_SIZE
    end
  end
  if a > last then
    return replies
  end
  fast_replies, fast_r, fast_k, fast_a = replies, r, k, a
end
