margin = tonumber(ARGV[HEAD_MARGIN])
step = math.max(1, math.floor(margin / 2))
local op = ARGV[HEAD_OP]
if op == 'O' then
  return once()
elseif op == 'Q' then
  return claim()
end
if op ~= 'M' and op ~= 'P' then
  local reply, _, tat = run(op, KEYS, 0, #KEYS, HEAD_SIZE + 1)
  if tat then
    return { reply, tat }
  end
  return reply
end
-- A packed call's batches after those fast.lua decided, if any. A one-key
-- GCRA spend or check comes folded (FOLDED_FORMAT): one argument holds its
-- operation, mode, now and values.
local folded_mode = { [0] = '0', '1', '2' }
local inline = op == 'P'

-- decimal writes the int64 h * B + l (limbs) in decimal, as Go does.
local function decimal(h, l)
  local sign = ''
  if h < 0 then
    sign, h, l = '-', -h, -l -- the value's negation, borrowed below
    if l < 0 then
      h, l = h - 1, l + B
    end
  end
  if h == 0 then
    return sign .. string.format('%d', l)
  end
  return sign .. string.format('%d%09d', h, l)
end

-- unfold_rate rewrites the folded rate batch at ARGV[a] (FRATE_FORMAT) in
-- place in the general layout (a batch S or C of one key: its now, 'BOX',
-- the entry's name, BoxUntil, then the op's RATE_* values), which the
-- general path decides: a check_rate the fast path left to it (a value it
-- does not read, a now before 1970) is decided as any other batch is.
local function unfold_rate(a)
  local code, nh, nl, uh, ul, cost, window, rate = struct.unpack(FRATE_FORMAT, ARGV[a])
  local at = a + 2 -- where the name is once the key count is in
  if inline then
    at = a + 3
  end
  ARGV[a] = code < FOLDED_CHECK and 'S' or 'C'
  table.insert(ARGV, a + 1, '1')
  local before = { string.format('%d', nh), string.format('%d', nl), 'BOX' }
  for i = 1, 3 do
    table.insert(ARGV, at + i - 1, before[i])
  end
  local after = { decimal(uh, ul), 'R' .. folded_mode[code % FOLDED_CHECK],
    string.format('%d', cost), string.format('%d', window), string.format('%d', rate) }
  for i = 1, 5 do
    table.insert(ARGV, at + 3 + i, after[i])
  end
end

local replies, r = fast_replies or {}, fast_r or 0
local k, a = fast_k or 0, fast_a or HEAD_SIZE + 1
while a <= #ARGV do
  local t = ARGV[a + PACK_OP]
  if #t == FRATE_LEN then
    -- Should ARGV refuse to be written (it is the call's own table), the
    -- batch fails alone, unless it was half rewritten.
    local ok, err = pcall(unfold_rate, a)
    if ok then
      t = ARGV[a + PACK_OP]
    elseif ARGV[a + PACK_OP] ~= t then
      error(err)
    else
      replies[r + 1], replies[r + 2] = redis.error_reply('limiter: ' .. tostring(err)), ''
      r, t = r + 2, nil
      if inline then
        a = a + 3
      else
        k, a = k + 1, a + 2
      end
    end
  end
  if not t then
    -- the batch failed above
  elseif #t == FOLDED_LEN then
    local code, h, l, ih, il, bh, bl = struct.unpack(FOLDED_FORMAT, t)
    local key = KEYS[k + 1]
    if inline then
      key = ARGV[a + 1]
    end
    now_hi, now_lo = h, l
    local ok, verdict, tat = pcall(spend1, key, ih, il, bh, bl, code < FOLDED_CHECK, folded_mode[code % FOLDED_CHECK])
    if not ok then
      if type(verdict) ~= 'table' then
        verdict = redis.error_reply(tostring(verdict))
      end
      tat = ''
    end
    replies[r + 1], replies[r + 2] = verdict, tat
    r = r + 2
    if inline then
      a = a + 2
    else
      k, a = k + 1, a + 1
    end
  else
    -- K, k: where the batch's keys are; v: where its now starts.
    local n = count(ARGV[a + PACK_KEYS])
    local K, v = KEYS, a + PACK_SIZE
    if inline then
      K, k, v = ARGV, a + (PACK_SIZE - 1), a + PACK_SIZE + n
    end
    local ok, reply, used, tat = pcall(run, t, K, k, n, v)
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
      local w = 0
      if t == 'S' or t == 'C' or t == 'R' or t == 'A' then
        w = n
      elseif t == 'Y' then
        w = 2 * n
      elseif t == 'E' then
        w = 2 + count(ARGV[v + NOW_SIZE + CALL_COUNTERS])
      end
      for i = 1, w do
        replies[r + i] = ''
      end
      r = r + w
      used = (ext or ext_make()).span(t, v + NOW_SIZE, n)
    end
    if inline then
      a = v + NOW_SIZE + used
    else
      k, a = k + n, v + NOW_SIZE + used
    end
  end
end
return replies
