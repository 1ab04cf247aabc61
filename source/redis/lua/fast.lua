-- The fast path: a packed call (M or P) in key format v1 is decided here,
-- as far as its batches are one-key spends or checks of a GCRA bucket
-- (folded: FOLDED_FORMAT), of a sliding or fixed window without a box,
-- of a rate counter with its box (folded: FRATE_FORMAT) or Edge Rate
-- Limiting calls of one counter, before the rest of the script makes any of its
-- functions: Redis runs this chunk afresh on every call, and making them
-- all cost more than deciding a few dozen such batches. The service puts
-- those batches first in a packed call (pack.go). The first batch this
-- path does not take, and every one after it, is left to the general
-- path (main.lua) with the replies so far: a batch of another shape, a
-- stored value of another algorithm or not well formed (a text TAT must
-- have 16 to 20 digits here), or a now before 1970. Each batch decides exactly
-- as spend1 or wspend and spend (batch.lua, windows.lua) do, and a
-- failing command fails its own batch only (redis.pcall), as main.lua's
-- pcall per batch does. This part opens the path's block and makes what
-- GCRA and window batches use; fastrates.lua adds rate counters and
-- fastpack.lua decides the batches and closes it.
local fast_replies, fast_r, fast_k, fast_a
local fast_format = ARGV[HEAD_FORMAT]
if (fast_format == '1' or fast_format == '1b') and (ARGV[HEAD_OP] == 'M' or ARGV[HEAD_OP] == 'P') then
  -- The globals this path reads, as locals: a global is a lookup in
  -- the script's environment on every use, a local a register. The
  -- functions made below capture them as upvalues, which costs a call
  -- of one batch about 1.7k instructions more; from about four batches
  -- a call it pays (in packs of ten a GCRA decision costs 0.4k less, a
  -- window's 0.7k).
  local ARGV, KEYS, redis, struct, string, type = ARGV, KEYS, redis, struct, string, type
  local B = 1000000000
  local MAX_HI, MAX_LO = 9223372036, 854775807 -- math.MaxInt64
  local MAXC = 9007199254740991 -- 2^53 - 1, as in prelude.lua
  local inline, margin, binary = ARGV[HEAD_OP] == 'P', tonumber(ARGV[HEAD_MARGIN]), fast_format == '1b'
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
    local nm = nh * 1000 + (nl - nl % 1000000) / 1000000
    local xw = (nm - nm % W) / W -- math.floor(nm / W) without a call
    -- the counts at xw, as wcounts (windows.lua) reads them; held is the
    -- window before xw's, kept also by a fixed window, which does not
    -- count it
    local cur, held = 0, 0
    if p == W then
      if i == xw then
        cur, held = c, q
      elseif i == xw - 1 then
        held = c
      elseif i == xw + 1 then
        cur = q
      end
    end
    local prev = held
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
    if p == W and i == xw + 1 then
      q = cur + cost -- a counter of the next window stays there
    else
      i, c, q = xw, cur + cost, held
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
