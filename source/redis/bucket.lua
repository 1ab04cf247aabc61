-- Bucket script of the limiter's Redis source, key formats v1 and v2
-- (docs/redis.md). The Go side builds every call in one place, encode.go,
-- whose doc comment states this same layout.
--
-- One call decides and writes the buckets named in KEYS atomically: Redis
-- runs a script to completion before any other command, so two calls on
-- the same buckets behave as if one ran fully before the other.
--
-- A bucket holds one of three things. A GCRA bucket holds its TAT (unix
-- nanoseconds) as a decimal integer string. A window limit's bucket
-- (sliding or fixed window) holds its counter as one string
-- '<period>:<index>:<cur>:<prev>': the period in milliseconds, the index of
-- the window cur counts (its start is index * period unix ms), the hits of
-- that window and the hits of the one before it, all decimal integers,
-- e.g. '60000:29833334:17:40'. The ':' tells the two apart. A GCRA or
-- window op reads a value of the other as empty (a limit whose algorithm
-- changed starts afresh), and anything else is refused with an error. A
-- rate counter holds its hits per second, packed in binary (see rparse).
-- A penalty box's entry, kept beside its id's buckets, holds its expiry
-- (unix ns) as a decimal integer, and expires from Redis a margin after
-- it.
--
-- Lua numbers are doubles, exact only up to 2^53, and unix nanoseconds are
-- near 2^61. Every time is therefore held as two limbs (hi, lo) with
-- value = hi * 1e9 + lo, 0 <= lo < 1e9, and |hi| < 2^35: each limb is an
-- integer-valued double far from 2^53, so every sum, difference and
-- comparison below is exact. The service passes its own "now" (the script
-- never reads TIME), so a fake clock drives these decisions too. Window
-- arithmetic is in whole milliseconds, now_ms = floor(now / 1e6), below
-- 2^44 in magnitude; with count * period <= 2^53 - 1 (the config's bound)
-- and counts kept at or below 2^53 - 1, every window product is exact or,
-- where a stored count exceeds the limit's count, correctly above
-- anything it is compared with (see wspend).
--
-- Every call starts with the same three arguments:
--
-- ARGV[1]        operation: S spend (and write when allowed), C spend
--                as part of a batch denied elsewhere (decide, and write
--                only what a denied batch writes: a rate counter's hits
--                and box entries; nothing for GCRA and window ops), R
--                refund, D reset, A add hits to window counters (sync),
--                E an Edge Rate Limiting call, Y add hits to rate
--                counters and expiries to box entries (sync), O a spend
--                or refund under an idempotency record, Q claim an
--                idempotency key, M and P several batches in one call (all
--                described below)
-- ARGV[2]        expiry margin in whole milliseconds
-- ARGV[3]        key format: 1 (a key per bucket) or 2 (buckets are
--                fields of shared hashes)
--
-- S, C, R, D, A: KEYS are the batch's buckets, ARGV[4], [5] is now as
-- (hi, lo), and then per key, in order:
--   S, C: a GCRA op: 3 values, its mode (0 check-and-spend, 1 check-only,
--         2 spend-only), the increment EI*cost, the burst offset;
--         a window op: 4 values, its token ('W0', 'W1', 'W2' for a
--         sliding window in mode 0, 1, 2; 'F0' to 'F2' for a fixed one),
--         its cost, the limit's count, its period in ms;
--         a rate counter: 4 values, its token ('R0' to 'R2' for mode 0
--         to 2), its cost, its window in seconds (1, 10 or 60), its rate
--   R: a GCRA op: 1 value, the decrement (0 for check-only);
--      a window op: 3 values, 'W' or 'F', the hits to give back (0 for
--      check-only), the period;
--      a rate counter: 2 values, 'T' and the hits to give back
--   D: 1 value: 'G' for a GCRA bucket, or 'W' or 'F' followed by the
--      period ('W60000'), or 'T' for a rate counter
--   A: 4 values: the period, the index of the window the hits count in,
--      its hits, and the hits of the window before it
-- An op with a penalty box (every rate counter; a GCRA or window op of a
-- limit with a penalty) has more values before its own: in S and C,
-- 'BOX', its box entry's name and the expiry (unix ns) an id it boxes
-- gets; in R and D, 'BOX' and the name. Box entries are named in ARGV, not
-- declared: the service names each in its key's slot (its id's hash tag).
-- An op without a box has no more values, and takes the same path as
-- before boxes existed.
-- Numbers are decimal strings; the script splits int64s into limbs
-- itself, so each costs one argument (Redis spends a fair share of a call
-- on every argument it parses). A batch may mix GCRA and window ops.
--
-- Reply of S, C and R: {verdict, v_1, ..., v_n}, verdict 1 when the batch
-- is allowed (always 1 for R), v_i the value stored under key i before the
-- call, as stored, or "" when there was none (or, for a GCRA op, a full
-- bucket or a window counter); for an op with a box, its box entry's
-- value ("" for none), a space, and that. The service recomputes every
-- outcome from these values with the same functions the memory source
-- uses. E and Y are described at call and rsync. Reply of
-- D: how many buckets still counted something (a GCRA bucket not full, a
-- window counter with hits that count at now). Reply of A: {1, v_1, ...,
-- v_n}, v_i the counter stored after the add ("" when it counts nothing,
-- or is of another period).
--
-- M packs several independent batches into one call, so that concurrent
-- batches to one Redis share its per-call cost (on a cluster, see P).
-- KEYS holds the batches' keys one after another; after the header, ARGV
-- holds per batch its operation, its number of keys, its now as (hi, lo)
-- and its values per key as above, except that a one-key GCRA spend is
-- folded (see FOLD_OP below): 'S0' to 'C2' for its operation and mode,
-- its now, its increment and its burst offset. Each batch is decided
-- exactly as alone, under its own "now". The reply is the batches'
-- replies one after another in one flat list (a table per batch would cost
-- Redis more than the list): 1 + n items for an S, C, R or A batch of n
-- keys, 1 for a D batch. A batch that fails (say on a key that holds
-- neither a TAT nor a counter) answers its own error, then n empty strings
-- for an S, C, R or A batch, without touching the others. The whole call
-- is still one atomic script run.
--
-- P is M for a cluster node, where the keys of one call may only be
-- declared in KEYS when they share a slot. KEYS is empty, and each batch
-- carries its keys in ARGV, after its size: operation, n, n keys, now as
-- (hi, lo), values; folded, the token, the key, now, the two values.
-- Redis lets a script without flags reach undeclared keys of any slot the
-- node serves, and refuses a command on a key of another node's slot (one
-- that moved since the caller looked) with an error. The service packs
-- only one-key batches this way, so such a batch fails at its first
-- command on its key, having changed nothing, and is sent again alone. One
-- exception, while the slot migrates: a key still here but full is read
-- and deleted, and then the write of its new TAT is refused (the key is
-- gone from a migrating slot). That changes no answer: a full bucket and
-- a missing one are the same, and the call sent again starts from that.

local B = 1000000000
local MAX_HI, MAX_LO = 9223372036, 854775807 -- math.MaxInt64
-- MAXC is 2^53 - 1, the largest count a window counter holds: every
-- integer up to it is exact in a double.
local MAXC = 9007199254740991

-- Key format (ARGV[3]). In v1 every bucket is a key of its own, holding
-- its TAT. In v2 a bucket is a field of a hash that many buckets share (its
-- group), and the name the service passes for it, declared or not, is the
-- hash's name followed by the field: 'lim:v2:{12345}3:alice' is field
-- '3:alice' of hash 'lim:v2:{12345}'. The name has the hash's slot (its
-- hash tag is the group), so Redis Cluster routes and checks it as it
-- would the hash.
local GROUPED = ARGV[3] == '2'
if not GROUPED and ARGV[3] ~= '1' then
  error('limiter: unknown key format ' .. tostring(ARGV[3]))
end

-- A v2 hash is swept of its full buckets when a new field brings it to
-- SWEEP_AT fields, and after that whenever it has grown to twice the
-- fields its last sweep left (recorded in its field ''), so a sweep's
-- cost is shared by as many new fields as the hash held, and a hash never
-- holds much more than twice its buckets that are not full, or SWEEP_AT.
local SWEEP_AT = 32

-- The batch being decided: its "now" (set by run), and the margin.
local now_hi, now_lo, margin

-- ext holds the functions that only some calls need: those of window
-- counters (see the header for their layout), of sync, and of a failed
-- packed batch. ext_make makes them on first use (ext or ext_make()).
-- Redis makes every function of this script afresh on each call, and each
-- one made, with every variable it shares with the rest of the script,
-- costs it time that a call of GCRA spends should not pay.
local ext, ext_make

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

-- parse turns a stored TAT into limbs, refusing anything else but a
-- window or rate counter, for which it returns nil: a GCRA op reads
-- another algorithm's value as a missing bucket. A stored TAT is nearly always a positive
-- 19-digit number, and for those one tonumber of the whole string is
-- within 2^11 of the value: subtracting the exact low limb and rounding
-- the quotient gives the high limb exactly, for one string.sub and two
-- tonumber instead of split's two and two.
local function parse(key, s)
  local n = #s
  if n > 20 or not string.find(s, '^%-?%d+$') then
    local e = ext or ext_make()
    if e.counter(s) or e.israte(s) then
      return nil
    end
    error('limiter: ' .. key .. ' does not hold a TAT')
  end
  if n < 16 or string.byte(s, 1) == 45 then
    return split(s)
  end
  local l = tonumber(string.sub(s, n - 8))
  return math.floor((tonumber(s) - l) / B + 0.5), l
end

-- Converting text to numbers (tonumber, string.sub) is much of what this
-- script costs Redis, and a table lookup costs a tenth of a tonumber. The
-- batches packed into one call mostly share their limits' increments and
-- burst offsets, their sizes and the second of their now, so each distinct
-- argument string is converted once per call.
local count_of, hi_of, lo_of = {}, {}, {}

-- count turns a decimal argument of at most 2^53 (a batch size, the
-- seconds limb of now, a window op's numbers) into a number, exactly.
local function count(s)
  local v = count_of[s]
  if v == nil then
    v = tonumber(s)
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
    local x = tonumber(s)
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

-- Key format v2's own functions, made only for v2: the script's functions
-- are made afresh on every call.
local at, sweep, put
if GROUPED then
  -- at splits a v2 name into its hash and its field. The name's first '}'
  -- closes the group: the prefix and the namespace hold no braces.
  at = function(key)
    local e = string.find(key, '}', 1, true)
    return string.sub(key, 1, e), string.sub(key, e + 1)
  end

  -- sweep deletes the fields of a hash that count nothing at now (GCRA
  -- buckets that are full, window counters past their windows), and
  -- records how many fields are left. A value that is neither (written by
  -- someone else) is left alone: a sweep runs after a batch has been
  -- decided and while it is being written, where an error would stop the
  -- write half way.
  sweep = function(hash)
    local all = redis.call('HGETALL', hash)
    local full, n = {}, 0
    local left = 1 -- the record of this sweep
    for i = 1, #all, 2 do
      local field, v = all[i], all[i + 1]
      if field ~= '' then
        local stale = false
        if #v <= 20 and string.find(v, '^%-?%d+$') then
          local h, l = parse(field, v)
          stale = not lt(now_hi, now_lo, h, l)
        else
          stale = (ext or ext_make()).stale(v)
        end
        if stale then
          n = n + 1
          full[n] = field
        else
          left = left + 1
        end
      end
    end
    -- unpack puts every field on Lua's stack: a few thousand at a time.
    for i = 1, n, 4000 do
      redis.call('HDEL', hash, unpack(full, i, math.min(n, i + 3999)))
    end
    redis.call('HSET', hash, '', left)
  end

  -- put writes a bucket's TAT into its hash, whose expiry must then be at
  -- least ms away. PEXPIRE … GT only lengthens one, and treats a hash
  -- without an expiry as never expiring; such a hash exists only when
  -- this HSET made it, which HSET tells by adding a field, and then NX
  -- gives it one. A new field may also call for a sweep.
  put = function(key, ms, v)
    local hash, field = at(key)
    if redis.call('HSET', hash, field, v) == 0 then
      redis.call('PEXPIRE', hash, ms, 'GT')
      return
    end
    if redis.call('PEXPIRE', hash, ms, 'GT') == 0 then
      redis.call('PEXPIRE', hash, ms, 'NX')
    end
    local size = redis.call('HLEN', hash)
    if size >= SWEEP_AT and size >= 2 * (tonumber(redis.call('HGET', hash, '')) or 0) then
      sweep(hash)
    end
  end
end

-- get returns a bucket's stored string, or false when it has none.
local function get(key)
  if GROUPED then
    return redis.call('HGET', at(key))
  end
  return redis.call('GET', key)
end

-- drop deletes a bucket. A v2 hash left without fields is deleted by
-- Redis itself.
local function drop(key)
  if GROUPED then
    redis.call('HDEL', at(key))
  else
    redis.call('DEL', key)
  end
end

-- read returns a GCRA bucket's stored string and TAT limbs, or false for a
-- missing bucket (or one holding a window counter). A TAT not after now is
-- a full bucket, the same as a missing one: it is deleted on the spot.
local function read(key)
  -- get(key) written out, sparing a Lua function call per decision.
  local v
  if GROUPED then
    v = redis.call('HGET', at(key))
  else
    v = redis.call('GET', key)
  end
  if not v then
    return false
  end
  local h, l = parse(key, v)
  if not h then
    return false -- a window counter: a GCRA op reads it as missing
  end
  if not lt(now_hi, now_lo, h, l) then
    drop(key)
    return false
  end
  return v, h, l
end

-- store writes a TAT that is after now, expiring margin milliseconds after
-- the bucket is full again (relative to the now passed in).
local function store(key, h, l)
  local dh, dl = sub(h, l, now_hi, now_lo)
  local ms = string.format('%d', dh * 1000 + math.floor((dl + 999999) / 1000000) + margin)
  if GROUPED then
    put(key, ms, format(h, l))
  else
    -- PSETEX is SET … PX without the option parsing, and one argument less.
    redis.call('PSETEX', key, ms, format(h, l))
  end
end

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
      p, i, c, q = tonumber(p), tonumber(i), tonumber(c), tonumber(q)
      if p >= 1 and c <= MAXC and q <= MAXC and math.abs(i * p) <= MAXC then
        return p, i, c, q
      end
    end
    return nil
  end

  -- israte reports whether v has a rate counter's form (see rparse): a
  -- first byte that is not a digit nor '-', as the first of every TAT,
  -- window counter and box entry is, a width of 1, 2 or 4 at its sixth,
  -- and 1 to 60 counts of that width after it.
  local function israte(v)
    local b, w, n = string.byte(v, 1), string.byte(v, 6), #v - 6
    return n > 0 and b ~= 45 and (b < 48 or b > 57) and (w == 1 or w == 2 or w == 4) and n % w == 0 and n <= 60 * w
  end

  -- wsplit reads the value v of a window op's key: the counter's period,
  -- index, cur and prev, or nothing for a TAT or a rate counter (another
  -- algorithm's value, which a window op reads as empty). Anything else is
  -- refused.
  local function wsplit(key, v)
    local p, i, c, q = counter(v)
    if p then
      return p, i, c, q
    end
    if (#v > 20 or not string.find(v, '^%-?%d+$')) and not israte(v) then
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
  -- as window.Counter.At does: a counter of another period, or one older
  -- than the window before x, or newer than x, counts nothing at x.
  local function wcounts(W, x, p, i, c, q)
    if p ~= W then
      return 0, 0
    end
    if i == x then
      return c, q
    elseif i == x - 1 then
      return 0, c
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

  -- wspend decides a window op of spend, whose token is mode and whose
  -- cost, count and period are at ARGV[b+1..b+3]. It returns the value
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
  -- for a later window than x (written by a process whose clock is ahead)
  -- reads as empty, as the window functions say, but is never moved back:
  -- a sliding window's cost goes into its previous-window count when x is
  -- that window, and is dropped otherwise.
  local function wspend(key, b, mode)
    local cost, limit, W = count(ARGV[b + 1]), count(ARGV[b + 2]), count(ARGV[b + 3])
    local fixed = string.byte(mode, 1) == 70 -- 'F'
    local m = string.byte(mode, 2) -- '0' 48, '1' 49, '2' 50
    local v, p, wi, c, q = wread(key)
    local nm = nowms()
    -- Exact: |nm| < 2^53, so the quotient's rounding never reaches the
    -- next integer.
    local x = math.floor(nm / W)
    local cur, prev = wcounts(W, x, p, wi, c, q)
    if fixed then
      prev = 0
    end
    if cur > limit - cost or prev * (W - (nm - x * W)) > (limit - cur - cost) * W then
      return v, m ~= 50
    end
    if m == 49 or cost == 0 then
      return v, false
    end
    if p ~= W or wi <= x then
      return v, false, W, x, cur + cost, prev
    elseif wi == x + 1 and not fixed then
      return v, false, W, wi, c, math.min(q + cost, MAXC)
    end
    return v, false
  end

  -- wrefund gives back to a window op of refund ('W' or 'F' in t), whose
  -- hits and period are at ARGV[b+1], ARGV[b+2], and returns the value
  -- read and, when something is given back, the counter to store
  -- (period, index, cur, prev). It gives back only to the current window,
  -- when it holds hits (window.Refund): it never creates a counter nor
  -- touches the previous window.
  local function wrefund(key, b, t)
    local hits, W = count(ARGV[b + 1]), count(ARGV[b + 2])
    local v, p, wi, c, q = wread(key)
    local x = math.floor(nowms() / W)
    local cur, prev = wcounts(W, x, p, wi, c, q)
    if t == 'F' then
      prev = 0
    end
    if cur > 0 and hits > 0 then
      return v, W, x, math.max(cur - hits, 0), prev
    end
    return v
  end

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
    if v == '' or counter(v) or (#v <= 20 and string.find(v, '^%-?%d+$')) then
      return c
    end
    if not israte(v) then
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

  -- rwrite stores c, expiring margin milliseconds after it counts nothing
  -- any more (ratecounter.Counter.Expires: SECONDS after the newest second
  -- counted into, relative to the now passed in), or deletes it when that
  -- has come. A counter whose hits a refund took back is kept as it is
  -- until then, as the counter functions keep it. It returns the value
  -- written, or '' when it deleted.
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
    local ms = string.format('%d', (c.last + SECONDS) * 1000 - nowms() + margin)
    if GROUPED then
      put(key, ms, v)
    else
      redis.call('PSETEX', key, ms, v)
    end
    return v
  end

  -- bread reads a box entry: its value ('' when none) and its expiry as
  -- limbs, (0, 0) when the entry is missing or its expiry is not after
  -- now (the id is out of the box; Redis deletes the entry a margin
  -- later).
  local function bread(name)
    local v = get(name)
    if not v then
      return '', 0, 0
    end
    if #v > 20 or not string.find(v, '^%-?%d+$') then
      error('limiter: ' .. name .. ' does not hold a box entry')
    end
    local h, l = split(v)
    if lt(now_hi, now_lo, h, l) then
      return v, h, l
    end
    return v, 0, 0
  end

  -- bwrite stores a box entry's expiry (h, l), expiring margin
  -- milliseconds after it, or deletes the entry when that is not after
  -- now.
  local function bwrite(name, h, l)
    if lt(now_hi, now_lo, h, l) then
      store(name, h, l)
    else
      drop(name)
    end
  end

  -- settle writes what an op with a box writes whatever its batch's fate
  -- (see boxed): hits added to its counter, its box entry.
  local function settle(p)
    if p.ctr then
      radd(p.c, now_hi, p.add)
      rwrite(p.ctr, p.c)
    end
    if p.box then
      bwrite(p.box, p.h, p.l)
    end
  end

  -- gdecide decides a GCRA op of a limit with a box (its mode, increment
  -- and burst offset at ARGV[b..b+2]) as spend does, without writing. It
  -- returns the value read, whether its bucket denies the cost, and, when
  -- it does not, the new TAT when one is to be written.
  local function gdecide(key, b)
    local ih, il = num(ARGV[b + 1])
    local bh, bl = num(ARGV[b + 2])
    local v, th, tl = read(key)
    if not v then
      v, th, tl = '', now_hi, now_lo
    end
    local wh, wl = add(th, tl, ih, il)
    if lt(MAX_HI, MAX_LO, wh, wl) then
      wh, wl = MAX_HI, MAX_LO
    end
    local lh, ll = add(now_hi, now_lo, bh, bl)
    if lt(lh, ll, wh, wl) then
      return v, true
    end
    if ARGV[b] ~= '1' and lt(th, tl, wh, wl) then
      return v, false, wh, wl
    end
    return v, false
  end

  -- boxed decides, in a spend or check, an op with a penalty box, whose
  -- values at ARGV[b] are 'BOX', its box entry's name, the expiry an id it
  -- boxes gets (BoxUntil), and then its own: a GCRA op's mode, increment
  -- and burst offset; a window op's token, cost, count and period; a rate
  -- counter's token ('R0' to 'R2'), cost, window (s) and rate. It decides
  -- exactly as bucket.SpendBatch does:
  --   - a rate counter's hits over its window, its cost included, going
  --     above rate * window box the id until the later of its expiry and
  --     BoxUntil; it denies when the id is in the box afterwards. Its hits
  --     and its box entry are written (unless check-only) whatever the
  --     batch's fate.
  --   - a GCRA or window op whose id is in the box is denied, its bucket
  --     read and left alone; otherwise its bucket decides, and a denial
  --     in a mode that decides boxes the id (never shortening), which is
  --     written in check-and-spend mode whatever the batch's fate.
  -- It returns the reply's item (the box entry's value, a space, the
  -- bucket's), whether the op denies the batch, what to write whatever
  -- the batch's fate (nil, or a table for settle), and what to write when
  -- the batch is allowed: 'G' and a TAT's limbs, or 'W' and a window
  -- counter (period, index, cur, prev).
  local function boxed(key, b)
    local name = ARGV[b + 1]
    local uh, ul = num(ARGV[b + 2])
    local mode = ARGV[b + 3]
    local m = string.byte(mode, #mode) -- '0' 48, '1' 49, '2' 50
    local bv, eh, el = bread(name)
    if string.byte(mode, 1) == 82 then -- 'R': a rate counter
      local cost, W, rate = count(ARGV[b + 4]), count(ARGV[b + 5]), count(ARGV[b + 6])
      local v = get(key) or ''
      local c = rparse(key, v)
      local nh, nl = eh, el
      if rwin(c, now_hi, W) + cost > rate * W and lt(nh, nl, uh, ul) then
        nh, nl = uh, ul
      end
      local p
      if m ~= 49 then
        if cost > 0 then
          p = { ctr = key, c = c, add = cost }
        end
        if nh ~= eh or nl ~= el then
          p = p or {}
          p.box, p.h, p.l = name, nh, nl
        end
      end
      return bv .. ' ' .. v, m ~= 50 and lt(now_hi, now_lo, nh, nl), p
    end
    local gcra = #mode == 1
    if lt(now_hi, now_lo, eh, el) then
      -- In the box: denied, the bucket read for its own reset only.
      local v
      if gcra then
        v = read(key) or ''
      else
        v = wread(key)
      end
      return bv .. ' ' .. v, m ~= 50
    end
    local v, denied, kind, x1, x2, x3, x4
    if gcra then
      v, denied, x1, x2 = gdecide(key, b + 3)
      denied = denied and m ~= 50
      if x1 then
        kind = 'G'
      end
    else
      v, denied, x1, x2, x3, x4 = wspend(key, b + 3, mode)
      if x1 then
        kind = 'W'
      end
    end
    if denied then
      local p
      if m == 48 then
        p = { box = name, h = uh, l = ul }
        if lt(uh, ul, eh, el) then
          p.h, p.l = eh, el
        end
      end
      return bv .. ' ' .. v, true, p
    end
    return bv .. ' ' .. v, false, nil, kind, x1, x2, x3, x4
  end

  -- rrefund gives back to a rate counter, whose hits are at ARGV[b + 1]:
  -- up to that many come off the second of now, never below 0
  -- (ratecounter.Counter.Remove). It returns the value read and, when
  -- something was taken, the counter to store (rwrite).
  local function rrefund(key, b)
    local v = get(key) or ''
    local c = rparse(key, v)
    if rremove(c, now_hi, count(ARGV[b + 1])) > 0 then
      return v, c
    end
    return v
  end

  -- call applies an ERL call (operation E, bucket.ApplyCall): KEYS[1..m]
  -- are its counters and KEYS[m + 1] its box entry; ARGV[a] is m, then
  -- per counter its delta, window (s; 0 checks nothing) and rate, then the
  -- box action (N none, R read, A box when a counter went above its
  -- limit, P replace, X remove, E extend) and the expiry it gives. Each
  -- counter gets its delta at the second of now; a box action other than
  -- R and N sets the entry's expiry: A and E to the later of it and the
  -- given one (A only when a counter went above), P to the given one, X
  -- to none. Everything is read before anything is written. The reply is
  -- {1, c_1..c_m, box, box after}: the counters and the box entry as
  -- read, and the box entry as the call left it ('' when none).
  local function call(K, a)
    local m = count(ARGV[a])
    local out, cs, above = { 1 }, {}, false
    for i = 1, m do
      local b = a + 3 * i - 2
      local d, W, rate = count(ARGV[b]), count(ARGV[b + 1]), count(ARGV[b + 2])
      local v = get(K[i]) or ''
      out[i + 1] = v
      local c = rparse(K[i], v)
      radd(c, now_hi, d)
      if W > 0 and rwin(c, now_hi, W) > rate * W then
        above = true
      end
      cs[i] = c
    end
    local act = ARGV[a + 3 * m + 1]
    local uh, ul = num(ARGV[a + 3 * m + 2])
    local name = K[m + 1]
    local bv, eh, el = '', 0, 0
    if act ~= 'N' then
      bv, eh, el = bread(name)
    end
    local nh, nl = eh, el
    if act == 'P' then
      nh, nl = uh, ul
    elseif act == 'X' then
      nh, nl = 0, 0
    elseif (act == 'E' or (act == 'A' and above)) and lt(nh, nl, uh, ul) then
      nh, nl = uh, ul
    end
    for i = 1, m do
      if count(ARGV[a + 3 * i - 2]) > 0 then
        rwrite(K[i], cs[i])
      end
    end
    local after = bv
    if nh ~= eh or nl ~= el then
      bwrite(name, nh, nl)
      after = ''
      if lt(now_hi, now_lo, nh, nl) then
        after = format(nh, nl)
      end
    end
    out[m + 2], out[m + 3] = bv, after
    return out
  end

  -- rsync adds pushes of other processes (operation Y) to the rate
  -- counters and box entries K[k+1..k+n], whose values start at ARGV[a],
  -- three each: the hits ('' to only read, '-' for a push without a
  -- counter, whose key is then its box entry), the box entry's name (''
  -- for none) and the expiry to store ('0' to only read). Hits are added
  -- second by second, oldest first (ratecounter.Counter.Merge); a box
  -- entry becomes the later of its expiry and the pushed one. The reply
  -- is {1, c_1, b_1, ..., c_n, b_n}: each counter and box entry as
  -- stored after the push ('' for none).
  local function rsync(K, k, n, a)
    local out = { 1 }
    for i = 1, n do
      local b = a + 3 * (i - 1)
      local hits, name = ARGV[b], ARGV[b + 1]
      local key = K[k + i]
      local cv, after = '', ''
      local c, eh, el
      if hits ~= '-' then
        cv = get(key) or ''
        c = rparse(key, cv)
      end
      if name ~= '' then
        after, eh, el = bread(name)
      end
      if c and hits ~= '' then
        rmerge(c, rparse('a push to ' .. key, hits))
        cv = rwrite(key, c)
      end
      if name ~= '' then
        local ph, pl = num(ARGV[b + 2])
        if lt(eh, el, ph, pl) and lt(now_hi, now_lo, ph, pl) then
          store(name, ph, pl)
          after = format(ph, pl)
        end
      end
      out[2 * i], out[2 * i + 1] = cv, after
    end
    return out
  end

  -- busy reports whether the value v of a window op's key still counts
  -- something at now (bucket.Busy), spec being 'W' or 'F' and the period:
  -- hits in the current window or, for a sliding window, in the one
  -- before.
  local function busy(key, v, spec)
    if spec == 'T' then
      -- Not ratecounter.Counter.Empty: a hit in the last minute, and a
      -- clock not a minute or more behind the counter's last second.
      local c = rparse(key, v)
      local t = rnewest(c)
      return t ~= nil and t + SECONDS > now_hi and now_hi > c.last - SECONDS
    end
    local W = tonumber(string.sub(spec, 2))
    local cur, prev = wcounts(W, math.floor(nowms() / W), wsplit(key, v))
    return cur > 0 or (prev > 0 and string.byte(spec, 1) ~= 70)
  end

  -- stale reports whether a v2 hash's value v is a window counter or a
  -- rate counter that counts nothing at now (a rate counter from SECONDS
  -- after its last second, as rwrite lets it expire), for the sweep.
  local function stale(v)
    local p, i, c, q = counter(v)
    if p ~= nil then
      return ends(p, i, c, q) <= nowms()
    end
    if israte(v) then
      local ok, r = pcall(rparse, 'a field', v)
      return ok and r.last + SECONDS <= now_hi
    end
    return false
  end

  -- sync adds hits to the window counters K[k+1..k+n], whose values
  -- start at ARGV[a], four each: the period W, the index x of a window,
  -- its hits and the hits of window x - 1. The counter is rolled forward
  -- to the latest of its own window, x and the window of now; hits of a
  -- window older than the one before that are dropped (they no longer
  -- count), and a count never exceeds 2^53 - 1. With no hits to add it
  -- only reads. The reply holds each counter as stored after the add (''
  -- for none, or one of another period).
  local function sync(K, k, n, a)
    local out = { 1 }
    local nm = nowms()
    for i = 1, n do
      local key = K[k + i]
      local b = a + 4 * (i - 1)
      local W, x, h, ph = count(ARGV[b]), count(ARGV[b + 1]), count(ARGV[b + 2]), count(ARGV[b + 3])
      local v, p, wi, c, q = wread(key)
      if p ~= W then
        v, p = '', nil
      end
      if h > 0 or ph > 0 then
        local top = math.max(x, math.floor(nm / W))
        if p and wi > top then
          top = wi
        end
        local cur, prev = wcounts(W, top, p, wi, c, q)
        if x == top then
          cur, prev = cur + h, prev + ph
        elseif x == top - 1 then
          prev = prev + h
        end
        cur, prev = math.min(cur, MAXC), math.min(prev, MAXC)
        if cur > 0 or prev > 0 then
          v = wstore(key, W, top, cur, prev)
        else
          v = ''
        end
      end
      out[i + 1] = v
    end
    return out
  end

  -- span returns how many values a batch of operation op and n keys
  -- takes, its values starting at ARGV[a]: what a packed call skips when
  -- the batch fails.
  local function span(op, a, n)
    local b = a
    if op == 'S' or op == 'C' then
      for _ = 1, n do
        if ARGV[b] == 'BOX' then
          b = b + 3
        end
        if #ARGV[b] == 1 then
          b = b + 3
        else
          b = b + 4
        end
      end
    elseif op == 'R' then
      for _ = 1, n do
        if ARGV[b] == 'BOX' then
          b = b + 2
        end
        local t = ARGV[b]
        if t == 'W' or t == 'F' then
          b = b + 3
        elseif t == 'T' then
          b = b + 2
        else
          b = b + 1
        end
      end
    elseif op == 'D' then
      for _ = 1, n do
        if ARGV[b] == 'BOX' then
          b = b + 2
        end
        b = b + 1
      end
    elseif op == 'A' then
      b = b + 4 * n
    end
    return b - a
  end

  ext = {
    counter = counter, spend = wspend, store = wstore, refund = wrefund,
    busy = busy, stale = stale, sync = sync, span = span,
    boxed = boxed, settle = settle, bread = bread, rrefund = rrefund, rwrite = rwrite,
    call = call, rsync = rsync, israte = israte,
  }
  return ext
end

-- spend decides the batch of keys K[k+1..k+n] (K is KEYS or ARGV), whose
-- values start at ARGV[a], and writes its GCRA buckets and window
-- counters when it is allowed and write is set. What an op with a box
-- writes whatever the batch's fate (its hits, its box entry) is written
-- in any case: spend runs for S and for C, the part of a cluster batch
-- that an earlier part denied. It returns the reply and how many values
-- the batch took. Window ops are decided by ext.spend (wspend), ops with
-- a box by ext.boxed.
local function spend(K, k, n, a, write)
  local out = { 0 }
  local allowed = true
  local nw -- new TATs to write as (hi, lo) pairs at 2i-1, 2i; made when needed
  local ww -- new counters as (period, index, cur, prev) at 4i-3 .. 4i
  local pend -- what ops with a box write whatever the batch's fate, in order
  local b = a
  for i = 1, n do
    local key = K[k + i]
    local mode = ARGV[b]
    if #mode == 1 then
      local ih, il = num(ARGV[b + 1])
      local bh, bl = num(ARGV[b + 2])
      b = b + 3
      local v, th, tl = read(key)
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
        nw = nw or {}
        nw[2 * i - 1], nw[2 * i] = wh, wl
      end
    else
      local e = ext or ext_make()
      local v, denies, W, x, c, q
      if mode == 'BOX' then
        local p, kind
        v, denies, p, kind, W, x, c, q = e.boxed(key, b)
        if p then
          pend = pend or {}
          pend[#pend + 1] = p
        end
        if kind == 'G' then
          nw = nw or {}
          nw[2 * i - 1], nw[2 * i] = W, x
          W = nil
        end
        if #ARGV[b + 3] == 1 then
          b = b + 6
        else
          b = b + 7
        end
      else
        v, denies, W, x, c, q = e.spend(key, b, mode)
        b = b + 4
      end
      out[i + 1] = v
      if denies then
        allowed = false
      elseif W then
        local j = 4 * i
        ww = ww or {}
        ww[j - 3], ww[j - 2], ww[j - 1], ww[j] = W, x, c, q
      end
    end
  end
  if allowed then
    out[1] = 1
    if write and (nw or ww) then
      for i = 1, n do
        local h = nw and nw[2 * i - 1]
        if h then
          store(K[k + i], h, nw[2 * i])
        elseif ww and ww[4 * i] then
          local j = 4 * i
          ext.store(K[k + i], ww[j - 3], ww[j - 2], ww[j - 1], ww[j])
        end
      end
    end
  end
  if pend then
    for i = 1, #pend do
      ext.settle(pend[i])
    end
  end
  return out, b - a
end

-- spend1 is spend for a batch of one key, the common case, with lt and
-- add written out and no table: in Redis's Lua a function call costs about
-- a third of a tonumber, and a growing table as much as two. It decides
-- exactly as spend does with n = 1, and returns the reply's two items. Its
-- increment and burst offset are at ARGV[a], ARGV[a+1].
local function spend1(K, k, a, write, mode)
  local key = K[k + 1]
  local ih, il = num(ARGV[a])
  local bh, bl = num(ARGV[a + 1])
  local v, th, tl = read(key)
  if not v then
    v, th, tl = '', now_hi, now_lo -- t = max(now, tat)
  end
  -- newTAT = t + increment, saturating at the largest int64.
  local wh, wl = th + ih, tl + il
  if wl >= B then
    wh, wl = wh + 1, wl - B
  end
  if wh > MAX_HI or (wh == MAX_HI and wl > MAX_LO) then
    wh, wl = MAX_HI, MAX_LO
  end
  -- Denied when newTAT > now + burstOffset.
  local lh, ll = now_hi + bh, now_lo + bl
  if ll >= B then
    lh, ll = lh + 1, ll - B
  end
  if lh < wh or (lh == wh and ll < wl) then
    if mode ~= '2' then
      return 0, v
    end
  elseif write and mode ~= '1' and (th < wh or (th == wh and tl < wl)) then
    store(key, wh, wl)
  end
  return 1, v
end


-- refund gives back to K[k+1..k+n], whose values start at ARGV[a], and
-- returns the reply and how many values it took. Window ops are given
-- back by ext.refund (wrefund), rate counters by ext.rrefund. An op with a
-- box ('BOX' and its entry's name before its values) reads its entry,
-- never writes it, and its reply item is the entry's value, a space, and
-- its bucket's. Every value is read before anything is written, so a
-- batch that fails on a value it cannot read writes nothing.
local function refund(K, k, n, a)
  local out = { 1 }
  local pw -- what to write, per op: {h, l} a TAT (or a deletion), {W, x, c, q} a window, {c} a rate counter
  local b = a
  for i = 1, n do
    local key = K[k + i]
    local t = ARGV[b]
    local bv
    if t == 'BOX' then
      bv = (ext or ext_make()).bread(ARGV[b + 1])
      b = b + 2
      t = ARGV[b]
    end
    if t == 'W' or t == 'F' then
      local v, W, x, c, q = (ext or ext_make()).refund(key, b, t)
      out[i + 1] = v
      if W then
        pw = pw or {}
        pw[i] = { W, x, c, q }
      end
      b = b + 3
    elseif t == 'T' then
      local v, c = (ext or ext_make()).rrefund(key, b)
      out[i + 1] = v
      if c then
        pw = pw or {}
        pw[i] = { c }
      end
      b = b + 2
    else
      local dh, dl = num(t)
      b = b + 1
      local v, th, tl = read(key)
      if v then
        out[i + 1] = v
        -- newTAT = max(tat - decrement, now): never more than full.
        local wh, wl = sub(th, tl, dh, dl)
        if lt(wh, wl, now_hi, now_lo) then
          wh, wl = now_hi, now_lo
        end
        if lt(wh, wl, th, tl) then
          pw = pw or {}
          pw[i] = { wh, wl }
        end
      else
        out[i + 1] = ''
      end
    end
    if bv then
      out[i + 1] = bv .. ' ' .. out[i + 1]
    end
  end
  if pw then
    for i = 1, n do
      local w = pw[i]
      if w and w[4] then
        ext.store(K[k + i], w[1], w[2], w[3], w[4])
      elseif w and w[2] then
        if lt(now_hi, now_lo, w[1], w[2]) then
          store(K[k + i], w[1], w[2])
        else
          drop(K[k + i])
        end
      elseif w then
        ext.rwrite(K[k + i], w[1])
      end
    end
  end
  return out, b - a
end

-- reset deletes K[k+1..k+n] and counts those that still counted
-- something at now (bucket.Busy): a GCRA bucket that was not full, a
-- window counter with hits in the current window, or, for a sliding
-- window, in the previous one, a rate counter with hits in the last
-- minute, or a key whose id was in its box. Their values start at
-- ARGV[a], one each, after 'BOX' and the box entry's name for a key with
-- a box, whose entry is deleted too. Everything is read before anything
-- is deleted. It returns the count and how many values the batch took.
local function reset(K, k, n, a)
  local busy = 0
  local gone, m = {}, 0
  local b = a
  for i = 1, n do
    local key = K[k + i]
    local spec = ARGV[b]
    local counts = false
    if spec == 'BOX' then
      local name = ARGV[b + 1]
      local bv, eh, el = (ext or ext_make()).bread(name)
      counts = lt(now_hi, now_lo, eh, el)
      if bv ~= '' then
        m = m + 1
        gone[m] = name
      end
      b = b + 2
      spec = ARGV[b]
    end
    b = b + 1
    local v = get(key)
    if v then
      if spec == 'G' then
        local h, l = parse(key, v)
        if h and lt(now_hi, now_lo, h, l) then
          counts = true
        end
      elseif (ext or ext_make()).busy(key, v, spec) then
        counts = true
      end
      m = m + 1
      gone[m] = key
    end
    if counts then
      busy = busy + 1
    end
  end
  for i = 1, m do
    drop(gone[i])
  end
  return busy, b - a
end

-- run decides one batch: operation op on K[k+1..k+n], with "now" at
-- ARGV[a], ARGV[a+1] and its values after. It returns the batch's reply
-- and how many values the batch took after its now; for a one-key GCRA
-- spend, the reply's two items instead (verdict, then used, then the
-- TAT), which spares a table. A folded one-key spend (see FOLD_OP) comes
-- with its mode known, and only its increment and burst offset after its
-- now.
local function run(op, K, k, n, a, mode)
  now_hi, now_lo = count(ARGV[a]), tonumber(ARGV[a + 1])
  if op == 'S' or op == 'C' then
    if mode then
      local verdict, tat = spend1(K, k, a + 2, op == 'S', mode)
      return verdict, 2, tat
    end
    if n == 1 and #ARGV[a + 2] == 1 then
      local verdict, tat = spend1(K, k, a + 3, op == 'S', ARGV[a + 2])
      return verdict, 3, tat
    end
    return spend(K, k, n, a + 2, op == 'S')
  elseif op == 'R' then
    return refund(K, k, n, a + 2)
  elseif op == 'D' then
    return reset(K, k, n, a + 2)
  elseif op == 'A' then
    return (ext or ext_make()).sync(K, k, n, a + 2), 4 * n
  elseif op == 'E' then
    return (ext or ext_make()).call(K, a + 2), 0
  elseif op == 'Y' then
    return (ext or ext_make()).rsync(K, k, n, a + 2), 3 * n
  end
  error('limiter: unknown operation ' .. tostring(op))
end

-- words splits a record into its space-separated words.
local function words(s)
  local w, n = {}, 0
  for x in string.gmatch(s, '%S+') do
    n = n + 1
    w[n] = x
  end
  return w, n
end

-- live reports whether a record whose expiry is the decimal string e still
-- answers at now (now_hi, now_lo set by the caller).
local function live(e)
  local eh, el = split(e)
  return lt(now_hi, now_lo, eh, el)
end

-- O decides one spend or refund batch and records its answer, in this one
-- script run, so that a retry with the same idempotency key is answered
-- from the record and never decided twice. KEYS: the batch's keys, then
-- the record's key (on a cluster, in the batch's slot). ARGV after the
-- header: the batch's operation (S or R), the request's fingerprint, the
-- record's expiry in unix nanoseconds, the record key's lifetime in
-- milliseconds, now as (hi, lo), then the batch's values as for S or R.
--
-- A record is one string of words: the fingerprint, the expiry, the now
-- of the call, its verdict, and the value read of each key, a TAT or a
-- window counter ('-' for none, or a full bucket), from which the service
-- computes the first call's outcomes again. A record whose expiry has
-- come answers nothing.
--
-- Reply: {0, '', verdict, v_1..v_n} when decided now; {1, now, verdict,
-- v_1..v_n} when answered from the record (now: the first call's); {2}
-- when the record's fingerprint is another request's.
local function once()
  local n = #KEYS - 1
  local rkey = KEYS[n + 1]
  local fp = ARGV[5]
  now_hi, now_lo = count(ARGV[8]), tonumber(ARGV[9])
  local old = redis.call('GET', rkey)
  if old then
    local w, m = words(old)
    if live(w[2]) then
      if w[1] ~= fp or m ~= n + 4 then
        return { 2 }
      end
      local out = { 1, w[3], tonumber(w[4]) }
      for i = 1, n do
        local t = w[4 + i]
        if t == '-' then
          t = ''
        end
        out[3 + i] = t
      end
      return out
    end
  end
  local reply, _, tat = run(ARGV[4], KEYS, 0, n, 8)
  if tat then
    reply = { reply, tat }
  end
  local rec = { fp, ARGV[6], format(now_hi, now_lo), tostring(reply[1]) }
  local out = { 0, '', reply[1] }
  for i = 1, n do
    local t = reply[i + 1]
    out[3 + i] = t
    if t == '' then
      t = '-'
    end
    rec[4 + i] = t
  end
  redis.call('SET', rkey, table.concat(rec, ' '), 'PX', ARGV[7])
  return out
end

-- Q claims an idempotency key for a Redis Cluster batch whose record
-- cannot share a slot with all of its buckets. KEYS[1]: the claim's key.
-- ARGV after the header: the fingerprint, the expiry, the key's lifetime
-- in milliseconds, now as (hi, lo). A live claim is returned as it is (a
-- record, or the fingerprint and expiry followed by P while its call has
-- no known outcome); otherwise a pending claim is made and nil returned.
local function claim()
  now_hi, now_lo = count(ARGV[7]), tonumber(ARGV[8])
  local old = redis.call('GET', KEYS[1])
  if old and live(words(old)[2]) then
    return old
  end
  redis.call('SET', KEYS[1], ARGV[4] .. ' ' .. ARGV[5] .. ' P', 'PX', ARGV[6])
  return false
end

margin = tonumber(ARGV[2])
local op = ARGV[1]
if op == 'O' then
  return once()
elseif op == 'Q' then
  return claim()
end
if op ~= 'M' and op ~= 'P' then
  local reply, _, tat = run(op, KEYS, 0, #KEYS, 4)
  if tat then
    return { reply, tat }
  end
  return reply
end
-- In a packed call a one-key spend comes folded: one token for its
-- operation and mode ('S0' to 'C2') in place of operation, size and mode,
-- and then, after its now, only its increment and burst offset. Two
-- arguments fewer for the commonest batch: Redis parses and copies every
-- argument into ARGV.
local FOLD_OP = { S0 = 'S', S1 = 'S', S2 = 'S', C0 = 'C', C1 = 'C', C2 = 'C' }
local FOLD_MODE = { S0 = '0', S1 = '1', S2 = '2', C0 = '0', C1 = '1', C2 = '2' }
local inline = op == 'P'
local replies, r = {}, 0
local k, a = 0, 4
while a <= #ARGV do
  local bop, mode, n = FOLD_OP[ARGV[a]], FOLD_MODE[ARGV[a]], 1
  -- K, k: where the batch's keys are; v: where its now starts.
  local K, v = KEYS, a + 1
  if bop then
    if inline then
      K, k, v = ARGV, a, a + 2
    end
  else
    bop, n, v = ARGV[a], count(ARGV[a + 1]), a + 2
    if inline then
      K, k, v = ARGV, a + 1, a + 2 + n
    end
  end
  local ok, reply, used, tat = pcall(run, bop, K, k, n, v, mode)
  if ok then
    r = r + 1
    replies[r] = reply
    if tat then
      r = r + 1
      replies[r] = tat
    elseif type(reply) == 'table' then
      r = r - 1
      for i = 1, #reply do
        replies[r + i] = reply[i]
      end
      r = r + #reply
    end
  else
    if type(reply) ~= 'table' then
      reply = redis.error_reply(tostring(reply))
    end
    r = r + 1
    replies[r] = reply
    -- The batch's size is known without running it, so the batches after
    -- a failed one are still found, and its reply keeps its width.
    if bop == 'S' or bop == 'C' or bop == 'R' or bop == 'A' then
      for i = 1, n do
        replies[r + i] = ''
      end
      r = r + n
    end
    if mode then
      used = 2
    else
      used = (ext or ext_make()).span(bop, v + 2, n)
    end
  end
  if inline then
    a = v + 2 + used
  else
    k, a = k + n, v + 2 + used
  end
end
return replies
