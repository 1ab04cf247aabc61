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
        if (#v == 10 and string.byte(v, 1) == 84) or (#v <= 20 and string.find(v, '^%-?%d+$')) then -- a TAT
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
-- a full bucket, the same as a missing one: it is deleted on the spot, but
-- with keep read returns false and that TAT, and its caller writes the key
-- or deletes it.
local function read(key, keep)
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
    if keep then
      return false, h, l
    end
    drop(key)
    return false
  end
  return v, h, l
end

-- deadline is when a key whose value stops counting at unix ms ms
-- expires: the margin after, rounded up to a multiple of step (half the
-- margin), in the clock of the now passed in. A key therefore outlives
-- its value by the margin to one and a half, and consecutive writes of a
-- bucket mostly leave its deadline where it was. Every writer of a TAT, a
-- box entry or a rate counter uses this one rule (fastrates.lua's own copy
-- included), so a key's expiry is its value's deadline (a v2 hash's, the
-- latest of its fields'; docs/redis.md, "Expiry").
local function deadline(ms)
  return math.ceil((ms + margin) / step) * step
end

-- store writes a TAT that is after now (in binary, see parse, when the call
-- asks for it: BINARY), or with entry a box entry's expiry (always decimal text),
-- expiring at its deadline (of the time in whole milliseconds, rounded
-- up). When the key holds a TAT whose whole seconds are oh, full or not,
-- and whose deadline is not before the new one, store rewrites the value
-- only (SET … KEEPTTL, or in v2 HSET without PEXPIRE), which costs Redis
-- much less than setting an expiry.
local function store(key, h, l, oh, entry)
  local d = deadline(h * 1000 + math.ceil(l / 1000000))
  local v
  if BINARY and not entry then
    v = struct.pack('>Bi5I4', 84, h, l)
  else
    v = format(h, l)
  end
  -- the deadline of oh's whole seconds: a bound below the stored TAT's
  if oh and d <= deadline(oh * 1000) then
    if GROUPED then
      local hash, field = at(key)
      redis.call('HSET', hash, field, v)
    else
      redis.call('SET', key, v, 'KEEPTTL')
    end
    return
  end
  local ms = string.format('%d', d - now_hi * 1000 - math.floor(now_lo / 1000000))
  if GROUPED then
    put(key, ms, v)
  else
    -- PSETEX is SET … PX without the option parsing, and one argument less.
    redis.call('PSETEX', key, ms, v)
  end
end

