  -- The fast path's rate counters and box entries (check_rate spends and
  -- Edge Rate Limiting calls), inside the block fast.lua opens.
  --
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
      local b, _, _, _, _, w = string.byte(v, 1, 6)
      local m = #v - 6
      if not (m > 0 and b ~= 45 and b ~= 84 and (b < 48 or b > 57) and (w == 1 or w == 2 or w == 4) and m % w == 0 and m <= 60 * w) then
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
        -- (math.min and math.max written out: each is a call into C)
        local k = s - last
        local ns = {}
        for j = 1, k < 60 and k or 60 do
          ns[j] = 0
        end
        for j = 1, n < 60 - k and n or 60 - k do
          ns[j + k] = cs[j]
        end
        last, n, cs = s, n + k < 60 and n + k or 60, ns
        if k >= 60 then
          n = 0
        end
      end
      local j = last - s + 1
      local c = (cs[j] or 0) + d
      if c > 4294967295 then -- ratecounter.MaxHitsPerSecond
        c = 4294967295
      end
      cs[j] = c
      for i = n + 1, j - 1 do
        cs[i] = 0
      end
      if j > n then
        n = j
      end
      return last, n, cs
    end

    -- rsum is the hits of the W seconds up to s, as rwin.
    local function rsum(last, n, cs, s, W)
      local sum, j0 = 0, last - s
      local to = j0 + W
      if to > n then
        to = n
      end
      for j = (j0 > 0 and j0 or 0) + 1, to do
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
        local c = cs[j] or 0
        if c > most then
          most = c
        end
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
        res = rstore(key, last, n, cs, nh, nh * 1000 + (nl - nl % 1000000) / 1000000, was)
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

    -- rspend decides a folded rate batch (FRATE_FORMAT: a one-key spend or
    -- check of a rate counter with its box, its entry named name; mode '0'
    -- 48 to '2' 50; cost d, window win and rate; BoxUntil uh, ul) as
    -- boxed and settle do (boxes.lua): its hits over its window, its cost
    -- included, going above rate * window box the id until the later of
    -- its expiry and BoxUntil, and it denies (but in spend-only mode) while
    -- the id is in the box. Unless check-only, its hits and box entry are
    -- written whatever its verdict. It returns the reply's two items, or
    -- nothing when the general path must decide it.
    rspend = function(key, name, mode, d, win, rate, uh, ul, nh, nl)
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
        if th < uh or (th == uh and tl < ul) then
          th, tl = uh, ul
        end
      end
      if mode ~= 49 then
        local res
        if d > 0 then
          local was = v ~= '' and last or nil
          last, n, cs = radd(last, n, cs, nh, d)
          res = rstore(key, last, n, cs, nh, nh * 1000 + (nl - nl % 1000000) / 1000000, was)
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
