-- Bucket script of the limiter's Redis source, key format v1 (docs/redis.md).
--
-- One call decides and writes the buckets named in KEYS atomically: Redis
-- runs a script to completion before any other command, so two calls on
-- the same buckets behave as if one ran fully before the other.
--
-- Lua numbers are doubles, exact only up to 2^53, and unix nanoseconds are
-- near 2^61. Every time is therefore held as two limbs (hi, lo) with
-- value = hi * 1e9 + lo, 0 <= lo < 1e9, and |hi| < 2^35: each limb is an
-- integer-valued double far from 2^53, so every sum, difference and
-- comparison below is exact. The service passes its own "now" (the script
-- never reads TIME), so a fake clock drives these decisions too.
--
-- ARGV[1]        operation: S spend, R refund, D reset
-- ARGV[2], [3]   now as (hi, lo)
-- ARGV[4]        expiry margin in whole milliseconds
-- S: ARGV[5]     1 to write when the batch is allowed, 0 to read only
--    then 5 values per key: mode (0 check-and-spend, 1 check-only,
--    2 spend-only), increment EI*cost as (hi, lo), burst offset as (hi, lo)
-- R: 2 values per key: the decrement EI*cost as (hi, lo) (0 for check-only)
--
-- Reply of S and R: {verdict, tat_1, ..., tat_n}, verdict 1 when the batch
-- is allowed (always 1 for R), tat_i the TAT read before the call as its
-- stored decimal string, or "" for a missing or full bucket. The service
-- recomputes every outcome from these TATs with the same GCRA functions
-- the memory source uses. Reply of D: how many buckets were not full.

local B = 1000000000
local MAX_HI, MAX_LO = 9223372036, 854775807 -- math.MaxInt64

local op = ARGV[1]
local now_hi, now_lo = tonumber(ARGV[2]), tonumber(ARGV[3])
local margin = tonumber(ARGV[4])

local function lt(ah, al, bh, bl)
  return ah < bh or (ah == bh and al < bl)
end

local function add(ah, al, bh, bl)
  local h, l = ah + bh, al + bl
  if l >= B then
    return h + 1, l - B
  end
  return h, l
end

local function sub(ah, al, bh, bl)
  local h, l = ah - bh, al - bl
  if l < 0 then
    return h - 1, l + B
  end
  return h, l
end

-- parse turns a stored decimal integer string into limbs.
local function parse(key, s)
  if not string.find(s, '^%-?%d+$') or #s > 20 then
    error('limiter: ' .. key .. ' does not hold a TAT')
  end
  local neg = string.sub(s, 1, 1) == '-'
  if neg then
    s = string.sub(s, 2)
  end
  local n = #s
  local h, l = 0, tonumber(s)
  if n > 9 then
    h, l = tonumber(string.sub(s, 1, n - 9)), tonumber(string.sub(s, n - 8))
  end
  if neg then
    if l == 0 then
      return -h, 0
    end
    return -h - 1, B - l
  end
  return h, l
end

-- format turns limbs into the decimal integer string Go's strconv writes.
local function format(h, l)
  if h < 0 then
    if l == 0 then
      return '-' .. format(-h, 0)
    end
    return '-' .. format(-h - 1, B - l)
  end
  if h == 0 then
    return string.format('%d', l)
  end
  return string.format('%d%09d', h, l)
end

-- read returns a bucket's stored string and TAT limbs, or false for a
-- missing bucket. A TAT not after now is a full bucket, the same as a
-- missing one: it is deleted on the spot.
local function read(key)
  local v = redis.call('GET', key)
  if not v then
    return false
  end
  local h, l = parse(key, v)
  if not lt(now_hi, now_lo, h, l) then
    redis.call('DEL', key)
    return false
  end
  return v, h, l
end

-- store writes a TAT that is after now, expiring margin milliseconds after
-- the bucket is full again (relative to the now passed in).
local function store(key, h, l)
  local dh, dl = sub(h, l, now_hi, now_lo)
  local ms = dh * 1000 + math.floor((dl + 999999) / 1000000) + margin
  redis.call('SET', key, format(h, l), 'PX', string.format('%d', ms))
end

if op == 'S' then
  local write = ARGV[5] == '1'
  local out = { 0 }
  local allowed = true
  local new_hi, new_lo = {}, {}
  for i = 1, #KEYS do
    local a = 5 + (i - 1) * 5
    local mode = ARGV[a + 1]
    local ih, il = tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
    local bh, bl = tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5])
    local v, th, tl = read(KEYS[i])
    if v then
      out[i + 1] = v
    else
      out[i + 1] = ''
      th, tl = now_hi, now_lo -- t = max(now, tat)
    end
    -- newTAT = t + increment, saturating at the largest int64 as gcra does.
    local wh, wl = add(th, tl, ih, il)
    if lt(MAX_HI, MAX_LO, wh, wl) then
      wh, wl = MAX_HI, MAX_LO
    end
    -- Allowed when newTAT - burstOffset <= now.
    local lh, ll = add(now_hi, now_lo, bh, bl)
    if lt(lh, ll, wh, wl) then
      if mode ~= '2' then
        allowed = false
      end
    elseif mode ~= '1' and lt(th, tl, wh, wl) then
      new_hi[i], new_lo[i] = wh, wl
    end
  end
  if allowed then
    out[1] = 1
    if write then
      for i = 1, #KEYS do
        if new_hi[i] then
          store(KEYS[i], new_hi[i], new_lo[i])
        end
      end
    end
  end
  return out
elseif op == 'R' then
  local out = { 1 }
  for i = 1, #KEYS do
    local a = 4 + (i - 1) * 2
    local dh, dl = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
    local v, th, tl = read(KEYS[i])
    if v then
      out[i + 1] = v
      -- newTAT = max(tat - decrement, now): never more than full.
      local wh, wl = sub(th, tl, dh, dl)
      if lt(wh, wl, now_hi, now_lo) then
        wh, wl = now_hi, now_lo
      end
      if lt(wh, wl, th, tl) then
        if lt(now_hi, now_lo, wh, wl) then
          store(KEYS[i], wh, wl)
        else
          redis.call('DEL', KEYS[i])
        end
      end
    else
      out[i + 1] = ''
    end
  end
  return out
elseif op == 'D' then
  local n = 0
  for i = 1, #KEYS do
    local v = redis.call('GET', KEYS[i])
    if v then
      local h, l = parse(KEYS[i], v)
      if lt(now_hi, now_lo, h, l) then
        n = n + 1
      end
      redis.call('DEL', KEYS[i])
    end
  end
  return n
end
return redis.error_reply('limiter: unknown operation ' .. tostring(op))
