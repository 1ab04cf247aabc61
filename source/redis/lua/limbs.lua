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

-- split turns a decimal integer string into limbs.
local function split(s)
  local neg = string.byte(s, 1) == 45 -- '-', without making a string
  if neg then
    s = string.sub(s, 2)
  end
  local n = #s
  local h, l = 0, nil
  if n > 9 then
    h, l = string.sub(s, 1, n - 9) + 0, string.sub(s, n - 8) + 0
  else
    l = s + 0
  end
  if neg then
    if l == 0 then
      return -h, 0
    end
    return -h - 1, B - l
  end
  return h, l
end

-- A TAT is stored as decimal text or in binary (BINARY writes it so): 'T'
-- (84), then its limbs as big-endian integers, hi in 5 signed bytes and lo
-- in 4 unsigned ones (struct '>i5I4'), 10 bytes in all. One struct call
-- reads or writes it, where text takes several conversions. Every reader
-- of a stored value tells the binary form apart by its size and first
-- byte (istat in windows.lua), as no other value is 10 bytes starting
-- with 'T'.
--
-- parse turns a stored TAT, in either form, into limbs, refusing anything
-- else but a window or rate counter, for which it returns nil: a GCRA op reads
-- another algorithm's value as a missing bucket. A stored text TAT is nearly always a positive
-- 19-digit number, and for those one conversion of the whole string is
-- within 2^11 of the value: subtracting the exact low limb and rounding
-- the quotient gives the high limb exactly, for one string.sub and two
-- conversions instead of split's two and two.
local function parse(key, s)
  local n = #s
  if n == 10 and string.byte(s, 1) == 84 then
    local h, l = struct.unpack('>i5I4', s, 2)
    if l >= B or h > MAX_HI or (h == MAX_HI and l > MAX_LO) or h < -MAX_HI - 1 or (h == -MAX_HI - 1 and l < B - MAX_LO - 1) then
      error('limiter: ' .. key .. ' does not hold a TAT') -- not the limbs of an int64
    end
    return h, l
  end
  if n > 20 or not string.find(s, '^%-?%d+$') then
    local e = ext or ext_make()
    if e.counter(s) or e.israte(s) or string.byte(s, 1) == 76 then -- 'L': a lease set
      return nil
    end
    error('limiter: ' .. key .. ' does not hold a TAT')
  end
  if n < 16 or string.byte(s, 1) == 45 then
    return split(s)
  end
  local l = string.sub(s, n - 8) + 0
  return math.floor((s - l) / B + 0.5), l
end

-- Converting text to numbers (tonumber, string.sub) is much of what this
-- script costs Redis, and a table lookup costs a tenth of a tonumber.
-- Arithmetic on a string (s + 0) converts it once, where tonumber converts
-- it twice (to check it, then to return it): the script writes s + 0
-- wherever the text is known to be a decimal number (an argument the
-- service wrote, or a stored value a pattern matched first). The
-- batches packed into one call mostly share their limits' increments and
-- burst offsets, their sizes and the second of their now, so each distinct
-- argument string is converted once per call.
local count_of, hi_of, lo_of = {}, {}, {}

-- count turns a decimal argument of at most 2^53 (a batch size, the
-- seconds limb of now, a window op's numbers) into a number, exactly.
local function count(s)
  local v = count_of[s]
  if v == nil then
    v = s + 0
    count_of[s] = v
  end
  return v
end

-- num turns a decimal int64 argument into limbs. Up to 15 characters the
-- value is below 2^53, so one tonumber holds it exactly and the limbs
-- come by exact division; longer ones are split as text.
local function num(s)
  local h = hi_of[s]
  if h then
    return h, lo_of[s]
  end
  local l
  if #s > 15 then
    h, l = split(s)
  else
    local x = s + 0
    h = math.floor(x / B)
    l = x - h * B
    if l < 0 then
      h, l = h - 1, l + B
    elseif l >= B then
      h, l = h + 1, l - B
    end
  end
  hi_of[s], lo_of[s] = h, l
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

