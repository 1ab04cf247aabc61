  -- The fast path's loop over a packed call's batches, which closes the
  -- block fast.lua opens.
  local replies, r, k, a = {}, 0, 0, HEAD_SIZE + 1
  -- The string of the last text batch's now (seconds) and its value:
  -- batches in one call mostly share it, and comparing two Lua strings
  -- costs next to nothing.
  local s_nh, nh_text
  local last = #ARGV
  -- With its keys declared (M), the call reads them all with one MGET at
  -- its first GCRA batch: each redis.pcall costs Redis more than the
  -- command it runs. MGET answers nil both for a missing key and for one
  -- of another type, so a nil is read again with GET, which tells them
  -- apart. A GCRA batch notes its key's new value in wrote, where a later
  -- batch of the same key finds it (false: deleted).
  local ahead, wrote = nil, {}
  -- The decimal text of the last new TAT's whole seconds (the high limb):
  -- the TATs a call writes mostly share it.
  local s_wh, wh_text
  while a <= last do
    -- A batch's first argument is a folded batch (FOLDED_FORMAT) or its
    -- operation (PACK_OP); a window batch's op token follows its now.
    -- v: where a folded batch's successor starts, or another's now.
    local t = ARGV[a + PACK_OP]
    local key, v, win, nkeys, code, nh, nl, ih, il, bh, bl, rate
    if #t == FOLDED_LEN then
      code, nh, nl, ih, il, bh, bl = struct.unpack(FOLDED_FORMAT, t)
      key, v = KEYS[k + 1], a + 1
      if inline then
        key, v = ARGV[a + 1], a + 2
      end
    elseif #t == FRATE_LEN then
      -- a check_rate: ih, il its BoxUntil; bh, bl, rate its cost, window
      -- and rate; v: its box entry's name
      code, nh, nl, ih, il, bh, bl, rate = struct.unpack(FRATE_FORMAT, t)
      key, v, win = KEYS[k + 1], a + 1, 'BOX'
      if inline then
        key, v = ARGV[a + 1], a + 2
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
      if win ~= 'W0' and win ~= 'W1' and win ~= 'W2' and win ~= 'F0' and win ~= 'F1' and win ~= 'F2' then
        break
      end
    else
      break
    end
    -- write: a spend (S), not a check (C); mode '0' 48 to '2' 50 (E: unused).
    -- Comparing two of Lua's strings is comparing two pointers, where
    -- string.byte is a call into C.
    local write, mode
    if code then
      write, mode = code < FOLDED_CHECK, 48 + code % FOLDED_CHECK
    else
      write, mode = t == 'S', 48
      if win == 'W1' or win == 'F1' then
        mode = 49
      elseif win == 'W2' or win == 'F2' then
        mode = 50
      end
      local s = ARGV[v + NOW_HI]
      if s ~= s_nh then
        s_nh, nh_text = s, s + 0
      end
      nh, nl, v = nh_text, ARGV[v + NOW_LO] + 0, v + NOW_SIZE
    end
    if nh < 1 then
      break
    end
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
      verdict, got = rspend(key, ARGV[v], mode, bh, bl, rate, ih, il, nh, nl)
      if verdict == nil then
        break
      end
      v = v + 1
    elseif win then
      verdict, got = window(key, write, win == 'F0' or win == 'F1' or win == 'F2', mode, nh, nl, v)
      if verdict == nil then
        break
      end
      v = v + WIN_SIZE
    else
      if ahead == nil then
        ahead = not inline and #KEYS > 1 and redis.pcall('MGET', unpack(KEYS))
        if ahead and ahead.err then
          ahead = false
        end
      end
      -- got: a string or false; only GET answers an error (a table)
      got = wrote[key]
      if got == nil then
        got = ahead and ahead[k + 1]
        if not got then
          got = redis.pcall('GET', key)
          if got and type(got) == 'table' then
            verdict, got = got, false
          end
        end
      end
      local th, tl = nh, nl -- t = max(now, tat)
      -- oh, ol: the stored TAT, whose deadline (store.lua) is its key's
      -- expiry; full: that TAT is not after now
      local oh, ol, full
      if got then
        local n = #got
        if n == 10 and string.byte(got, 1) == 84 then -- a binary TAT, read as parse does
          oh, ol = struct.unpack('>i5I4', got, 2)
          if ol >= B or oh < 1 or oh > MAX_HI or (oh == MAX_HI and ol > MAX_LO) then
            break
          end
        elseif n < 16 or n > 20 or not string.find(got, '^%d+$') then
          break
        else
          -- got - ol is a double within 2^10 of oh * B: rounded to the
          -- nearest whole (q - q % 1 is math.floor without a call), oh
          ol = string.sub(got, n - 8) + 0
          oh = (got - ol) / B + 0.5
          oh = oh - oh % 1
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
        -- newTAT = t + increment. Denied when newTAT > now + burstOffset,
        -- compared exactly, or when newTAT does not fit in an int64.
        local wh, wl = th + ih, tl + il
        if wl >= B then
          wh, wl = wh + 1, wl - B
        end
        local lh, ll = nh + bh, nl + bl
        if ll >= B then
          lh, ll = lh + 1, ll - B
        end
        local denies = lh < wh or (lh == wh and ll < wl) or wh > MAX_HI or (wh == MAX_HI and wl > MAX_LO)
        -- failed: the error a command answered; now_stored: the key's
        -- value after the batch (false: none; nil: as it was). SET and
        -- PSETEX answer a table (a status or an error), DEL a number.
        local failed, now_stored
        if denies then
          if mode ~= 50 then
            verdict = 0
          end
        elseif write and mode ~= 49 and (th < wh or (th == wh and tl < wl)) then
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
            if wh ~= s_wh then
              s_wh, wh_text = wh, string.format('%d', wh)
            end
            v = wh_text .. string.format('%09d', wl) -- '%d%09d'
          end
          local e
          if o and w <= o - o % step + step then
            e = redis.pcall('SET', key, v, 'KEEPTTL')
          else
            w = w - 1
            e = redis.pcall('PSETEX', key, string.format('%d', w - w % step + step - nh * 1000 - (nl - nl % 1000000) / 1000000), v)
          end
          if e.err then
            failed = e
          else
            now_stored = v
          end
          full = false
        end
        if full then
          local e = redis.pcall('DEL', key)
          if type(e) == 'table' then
            failed = e
          else
            now_stored = false
          end
        end
        -- a failed command changed nothing, so what a later batch of the
        -- key reads stays as it was
        if failed then
          verdict, got = failed, ''
        elseif now_stored ~= nil then
          wrote[key] = now_stored
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
