-- ext_make makes ext, the functions of window counters, of sync and of a
-- failed packed batch.
ext_make = function()
  -- nowms returns floor(now / 1e6). now_hi * 1000 is exact (|now_hi| <
  -- 2^35), and lo / 1e6 for an integer lo below 1e9 is never within
  -- rounding of the next integer, so its floor is exact too; lo >= 0
  -- makes it the floor for times before 1970 as well.
  local function nowms()
    return now_hi * 1000 + math.floor(now_lo / 1000000)
  end

  -- counter reads a window counter ('<period>:<index>:<cur>:<prev>'),
  -- returning its four numbers, or nil when s is not one. Each part must
  -- be exact in a double: at most 16 digits, the counts and the window's
  -- start (index * period) at most 2^53 - 1 in magnitude. A part above
  -- that reads as at least 2^53 (rounding never crosses a representable
  -- bound), so the checks themselves are exact.
  local function counter(s)
    local p, i, c, q = string.match(s, '^(%d+):(%-?%d+):(%d+):(%d+)$')
    if p and #p <= 16 and #i <= 17 and #c <= 16 and #q <= 16 then
      p, i, c, q = p + 0, i + 0, c + 0, q + 0
      if p >= 1 and c <= MAXC and q <= MAXC and math.abs(i * p) <= MAXC then
        return p, i, c, q
      end
    end
    return nil
  end

  -- istat reports whether v is a binary TAT (see parse in limbs.lua).
  local function istat(v)
    return #v == 10 and string.byte(v, 1) == 84
  end

  -- israte reports whether v has a rate counter's form (see rparse): a
  -- first byte that is not a digit nor '-', as the first of every text
  -- TAT, window counter and box entry is, nor the 'T' of a binary TAT
  -- (a counter's first byte is its seconds' highest, 0 to 3 or 252 to 255
  -- for seconds below 2^34 in magnitude), a width of 1, 2 or 4 at its
  -- sixth, and 1 to 60 counts of that width after it.
  local function israte(v)
    local b, w, n = string.byte(v, 1), string.byte(v, 6), #v - 6
    return n > 0 and b ~= 45 and b ~= 84 and (b < 48 or b > 57) and (w == 1 or w == 2 or w == 4) and n % w == 0 and n <= 60 * w
  end

  -- wsplit reads the value v of a window op's key: the counter's period,
  -- index, cur and prev, or nothing for a TAT, a rate counter or a lease
  -- set (another algorithm's value, which a window op reads as empty).
  -- Anything else is refused.
  local function wsplit(key, v)
    local p, i, c, q = counter(v)
    if p then
      return p, i, c, q
    end
    if (#v > 20 or not string.find(v, '^%-?%d+$')) and not istat(v) and not israte(v) and string.byte(v, 1) ~= 76 then
      error('limiter: ' .. key .. ' does not hold a window counter')
    end
  end

  -- wread returns a window op's stored value ('' when none) and, when it
  -- is a counter, its period, index, cur and prev.
  local function wread(key)
    local v = get(key)
    if not v then
      return ''
    end
    return v, wsplit(key, v)
  end

  -- wcounts returns the hits of window x (of period W) and of the window
  -- before it, as a counter read (p, i, c, q; p nil for none) holds them,
  -- as window.Counter.At does: a counter of window x + 1 (written by a
  -- process whose clock is ahead) holds x's hits as its q and no longer
  -- knows the window before x; one of another period, or older than the
  -- window before x, or newer than x + 1, counts nothing at x.
  local function wcounts(W, x, p, i, c, q)
    if p ~= W then
      return 0, 0
    end
    if i == x then
      return c, q
    elseif i == x - 1 then
      return 0, c
    elseif i == x + 1 then
      return q, 0
    end
    return 0, 0
  end

  -- ends returns the unix ms from which a counter (period p, index i,
  -- counts c and q) counts nothing: two periods after its start while c >
  -- 0, one while only q > 0, at once when neither.
  local function ends(p, i, c, q)
    local e = i * p
    if c > 0 then
      return e + 2 * p
    elseif q > 0 then
      return e + p
    end
    return e
  end

  -- wstore writes the counter (period W, window index x, counts c and
  -- q), expiring margin milliseconds after it stops counting (relative to
  -- the now passed in). A counter that counts nothing at now is deleted
  -- instead. It returns the value written, or '' when it deleted.
  local function wstore(key, W, x, c, q)
    local nm, e = nowms(), ends(W, x, c, q)
    if e <= nm then
      drop(key)
      return ''
    end
    local ms = string.format('%d', e - nm + margin)
    local v = string.format('%d:%d:%d:%d', W, x, c, q)
    if GROUPED then
      put(key, ms, v)
    else
      redis.call('PSETEX', key, ms, v)
    end
    return v
  end

  -- frame returns the period W and index x of the counter a window op of
  -- kind k (the byte 'W', 'F' or 'K') counts into at now, and whether it
  -- is fixed, from the op's period argument a: a window's x is that of
  -- now's window. A calendar counter ('K') is a fixed counter whose
  -- bounds the service found: its key names the period, a is the period's
  -- end e (unix ms), and it is kept as the counter of period 1 at index
  -- e - 2, which ends() has expire at e.
  local function frame(k, a)
    if k == 75 then -- 'K'
      return 1, a - 2, true
    end
    -- Exact: |nowms()| < 2^53, so the quotient's rounding never reaches
    -- the next integer.
    return a, math.floor(nowms() / a), k == 70 -- 'F'
  end

  -- wspend decides a window op of spend, whose token is mode and whose
  -- values (WIN_*) are at ARGV[b]. It returns the value
  -- read, whether the op denies the batch, and the counter to write when
  -- the batch is allowed (period, index, cur, prev; nil for none).
  --
  -- A cost c at now_ms, in window x (start s = x * W, e = now_ms - s
  -- elapsed), is allowed, as window.Spend decides, when
  --   cur*W + prev*(W - e) + c*W <= count*W       (fixed: prev = 0)
  -- which holds exactly when cur <= count - c and prev*(W - e) <= (count
  -- - cur - c)*W. Every operand is an integer of at most 2^53 - 1, and so
  -- is the right side (at most count*W); prev*(W - e) may exceed 2^53
  -- when a stored count is above the limit's count, and is then rounded
  -- to a double still above 2^53 - 1, so the comparison stays right.
  --
  -- An allowed op that writes adds its cost to window x. A counter stored
  -- for window x + 1 (written by a process whose clock is ahead) stays
  -- there: the cost goes into its count of window x. Any other counter is
  -- replaced by one of window x, as window.Spend replaces it, also one
  -- further ahead (a clock off by more than a period, or set back). A
  -- fixed window keeps the hits of the window before x too, which it does
  -- not count, for a process whose clock is behind.
  local function wspend(key, b, mode)
    local cost, limit = count(ARGV[b + WIN_COST]), count(ARGV[b + WIN_COUNT])
    local W, x, fixed = frame(string.byte(mode, 1), count(ARGV[b + WIN_PERIOD]))
    local m = string.byte(mode, 2) -- '0' 48, '1' 49, '2' 50
    local v, p, wi, c, q = wread(key)
    local nm = nowms()
    local cur, held = wcounts(W, x, p, wi, c, q)
    local prev = held
    if fixed then
      prev = 0
    end
    if cur > limit - cost or prev * (W - (nm - x * W)) > (limit - cur - cost) * W then
      return v, m ~= 50
    end
    if m == 49 or cost == 0 then
      return v, false
    end
    if p == W and wi == x + 1 then
      return v, false, W, wi, c, cur + cost
    end
    return v, false, W, x, cur + cost, held
  end

  -- wrefund gives back to a window op of refund ('W', 'F' or 'K' in t), whose
  -- values (RWIN_*) are at ARGV[b], and returns the value
  -- read and, when something is given back, the counter to store
  -- (period, index, cur, prev). It gives back only to the current window,
  -- when it holds hits (window.Refund): it never creates a counter nor
  -- touches the previous window, and a counter of window x + 1 gives back
  -- from its count of window x, staying where it is.
  local function wrefund(key, b, t)
    local hits = count(ARGV[b + RWIN_HITS])
    local W, x = frame(string.byte(t, 1), count(ARGV[b + RWIN_PERIOD]))
    local v, p, wi, c, q = wread(key)
    local cur, held = wcounts(W, x, p, wi, c, q)
    if cur > 0 and hits > 0 then
      if p == W and wi == x + 1 then
        return v, W, wi, c, math.max(cur - hits, 0)
      end
      return v, W, x, math.max(cur - hits, 0), held
    end
    return v
  end

