  -- Rate counters and penalty boxes. A rate counter is stored packed
  -- (Redis's struct library): the newest second counted into (unix
  -- seconds, ratecounter.Counter.Last) as a 5-byte signed big-endian
  -- integer, the width w of its counts (1, 2 or 4 bytes: the fewest that
  -- hold the largest), then the hits of that second and of each second
  -- before it as w-byte unsigned big-endian integers, up to the oldest of
  -- the last SECONDS seconds that holds a hit (the first count may be 0,
  -- after a refund): 7 bytes for a counter of one second of under 256
  -- hits, 246 at most. One struct.unpack reads it all, several times
  -- faster than decimal text. In Lua it is a table c: c.last, and c[j] the
  -- hits of second c.last - j (nil for 0), j from 0 to SECONDS - 1. A box
  -- entry holds its expiry (unix ns) as a decimal integer, as a TAT is
  -- held. Seconds are below 2^34 in magnitude, hits per second at most
  -- MAXH, and a window's sum at most SECONDS * MAXH < 2^38: every number
  -- here is an exact integer.
  local SECONDS = 60
  local MAXH = 4294967295 -- ratecounter.MaxHitsPerSecond

  -- RFMT[w][n] is the struct format of a counter of n seconds whose
  -- counts are w bytes wide.
  local RFMT = { [1] = {}, [2] = {}, [4] = {} }
  local RCOUNT = { [1] = 'B', [2] = 'H', [4] = 'I4' }
  local function rfmt(w, n)
    local f = RFMT[w][n]
    if not f then
      f = '>i5B' .. string.rep(RCOUNT[w], n)
      RFMT[w][n] = f
    end
    return f
  end

  -- rparse reads the value v of a rate counter's key: '' (none), and a
  -- TAT or a window counter (another algorithm's value), read as the
  -- empty counter of last 0, as Go's zero Counter. Anything else than a
  -- counter is an error.
  local function rparse(key, v)
    local c = { last = 0 }
    if v == '' or counter(v) or istat(v) or (#v <= 20 and string.find(v, '^%-?%d+$')) then
      return c
    end
    if not israte(v) then
      if string.byte(v, 1) == 76 then -- 'L': a lease set
        return c
      end
      error('limiter: ' .. key .. ' does not hold a rate counter')
    end
    local w = string.byte(v, 6)
    local n = (#v - 6) / w
    local t = { struct.unpack(rfmt(w, n), v) }
    c.last = t[1]
    for j = 0, n - 1 do
      local x = t[j + 3]
      if x > 0 then
        c[j] = x
      end
    end
    return c
  end

  -- rshift moves c on to end at second s (after c.last), as
  -- ratecounter.Counter.Add does: the seconds before s - SECONDS + 1 leave
  -- it, the seconds after c.last enter it empty.
  local function rshift(c, s)
    local k = s - c.last
    for j = SECONDS - 1, 0, -1 do
      if j >= k then
        c[j] = c[j - k]
      else
        c[j] = nil
      end
    end
    c.last = s
  end

  -- rwin returns the hits of the W seconds up to second s, s included
  -- (ratecounter.Counter.Window).
  local function rwin(c, s, W)
    local sum, j0 = 0, c.last - s
    for j = math.max(j0, 0), math.min(j0 + W - 1, SECONDS - 1) do
      sum = sum + (c[j] or 0)
    end
    return sum
  end

  -- radd adds d hits to second s, the current second, as
  -- ratecounter.Counter.Add: a later second than the last moves the
  -- counter on; one a minute or more before it (the clock went back that
  -- far) starts the counter afresh at s; a second stops at MAXH hits.
  local function radd(c, s, d)
    if d <= 0 then
      return
    end
    if s <= c.last - SECONDS then
      for j = 0, SECONDS - 1 do
        c[j] = nil
      end
      c.last = s
    elseif s > c.last then
      rshift(c, s)
    end
    local j = c.last - s
    c[j] = math.min((c[j] or 0) + d, MAXH)
  end

  -- rmerge adds every hit of counter o to c, as ratecounter.Counter.Merge
  -- does (an Add per second of o that holds hits, oldest first): c moves
  -- on to o's newest second with a hit when that is later, and o's seconds
  -- c no longer keeps then are dropped. Moving on once, first, gives the
  -- same counter as the Adds.
  local function rmerge(c, o)
    for j = 0, SECONDS - 1 do
      if o[j] then
        if o.last - j > c.last then
          rshift(c, o.last - j)
        end
        break
      end
    end
    for j = 0, SECONDS - 1 do
      local x = o[j]
      if x then
        local i = c.last - (o.last - j)
        if i < SECONDS then
          c[i] = math.min((c[i] or 0) + x, MAXH)
        end
      end
    end
  end

  -- rremove takes up to d hits from second s, never below 0, as
  -- ratecounter.Counter.Remove, and returns how many it took.
  local function rremove(c, s, d)
    if d <= 0 or s > c.last or s <= c.last - SECONDS then
      return 0
    end
    local j = c.last - s
    local taken = math.min(d, c[j] or 0)
    if taken > 0 then
      c[j] = c[j] - taken
    end
    return taken
  end

  -- rnewest returns the newest second that holds a hit, or nil.
  local function rnewest(c)
    for j = 0, SECONDS - 1 do
      if (c[j] or 0) > 0 then
        return c.last - j
      end
    end
    return nil
  end

  -- rwrite stores c, expiring at the deadline (store.lua) of the moment
  -- it counts nothing any more (ratecounter.Counter.Expires: SECONDS after
  -- the newest second counted into), or deletes it when that moment has
  -- come. A counter whose hits a refund took back is kept as it is until
  -- then, as the counter functions keep it. It returns the value written,
  -- or '' when it deleted.
  local function rwrite(key, c)
    if c.last + SECONDS <= now_hi then
      drop(key)
      return ''
    end
    local top = 0
    for j = SECONDS - 1, 0, -1 do
      if (c[j] or 0) > 0 then
        top = j
        break
      end
    end
    local w, most = { c.last, 1 }, 0
    for j = 0, top do
      local x = c[j] or 0
      w[j + 3] = x
      if x > most then
        most = x
      end
    end
    if most > 65535 then
      w[2] = 4
    elseif most > 255 then
      w[2] = 2
    end
    local v = struct.pack(rfmt(w[2], top + 1), unpack(w))
    local ms = string.format('%d', deadline((c.last + SECONDS) * 1000) - nowms())
    if GROUPED then
      put(key, ms, v)
    else
      redis.call('PSETEX', key, ms, v)
    end
    return v
  end

