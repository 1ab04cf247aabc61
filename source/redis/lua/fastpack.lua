  -- The fast path's loop over a packed call's batches, which closes the
  -- block fast.lua opens.
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
        if n == 10 and string.byte(got, 1) == 84 then -- a binary TAT, read as parse does
          oh, ol = struct.unpack('>i5I4', got, 2)
          if ol >= B or oh < 1 or oh > MAX_HI or (oh == MAX_HI and ol > MAX_LO) then
            break
          end
        elseif n < 16 or n > 20 or string.byte(got, 1) == 45 or not string.find(got, '^%d+$') then
          break
        else
          ol = string.sub(got, n - 8) + 0
          oh = math.floor((got - ol) / B + 0.5)
        end
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
          local o, v = oh and oh * 1000 + margin - 1
          if binary then
            v = struct.pack('>Bi5I4', 84, wh, wl) -- as store writes it
          else
            v = string.format('%d%09d', wh, wl)
          end
          if o and w <= o - o % step + step then
            e = redis.pcall('SET', key, v, 'KEEPTTL')
          else
            w = w - 1
            e = redis.pcall('PSETEX', key, string.format('%d', w - w % step + step - nh * 1000 - (nl - nl % 1000000) / 1000000), v)
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
